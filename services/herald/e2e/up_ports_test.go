package e2e

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// herald up with its NATS or dashboard port taken stops at once, before any
// service starts, naming the address and the setting that moves it.
func TestUpNamesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addr := taken.Addr().String()
	free := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for _, tc := range []struct {
		name       string
		args, want []string
	}{
		{"nats", []string{"--nats-listen", addr, "--http", ""},
			[]string{"herald up: NATS cannot listen on " + addr, "--nats-listen", "HERALD_NATS_URL=nats://"}},
		{"dashboard", []string{"--nats-listen", free, "--http", addr},
			[]string{"herald up: the dashboard cannot listen on " + addr, "--http", "(or HERALD_HTTP_ADDR)", `--http "" to turn it off`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			start := time.Now()
			out, code := runHeraldIn(t, data, nil, append([]string{"up", "--data-dir", data}, tc.args...)...)
			require.Equal(t, 1, code, out)
			require.Less(t, time.Since(start), 8*time.Second, "no 10 s wait for a server that cannot start")
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
			require.NotContains(t, out, "Herald is up")
		})
	}
}
