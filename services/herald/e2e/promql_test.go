package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/stretchr/testify/require"
)

// evalPanels loads two real scrapes, a minute apart, into Prometheus's own
// storage and evaluates every query with Prometheus's own engine, as
// Grafana would at the second scrape: each must parse, evaluate and return
// at least one series.
func evalPanels(t *testing.T, first, second []string, queries map[string]string) {
	t.Helper()
	series := map[string][2]string{} // series -> values at 0 and 1m ("_": absent)
	for i, scrapes := range [][]string{first, second} {
		for _, text := range scrapes {
			for _, line := range strings.Split(text, "\n") {
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				cut := strings.LastIndexByte(line, ' ')
				key, value := line[:cut], line[cut+1:]
				v, ok := series[key]
				if !ok {
					v = [2]string{"_", "_"}
				}
				v[i] = value
				series[key] = v
			}
		}
	}
	var load strings.Builder
	load.WriteString("load 1m\n")
	for key, v := range series {
		fmt.Fprintf(&load, "  %s %s %s\n", key, v[0], v[1])
	}
	storage := promqltest.LoadedStorage(t, load.String())
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, 10_000_000)
	at := time.Unix(60, 0)
	for name, query := range queries {
		q, err := engine.NewInstantQuery(context.Background(), storage, nil, query, at)
		require.NoError(t, err, "%s: %s", name, query)
		res := q.Exec(context.Background())
		require.NoError(t, res.Err, "%s: %s", name, query)
		switch v := res.Value.(type) {
		case promql.Vector:
			require.NotEmpty(t, v, "%s: %s returns nothing from a real scrape", name, query)
		case promql.Scalar:
		default:
			t.Fatalf("%s: %s returns a %T", name, query, res.Value)
		}
		q.Close()
	}
}
