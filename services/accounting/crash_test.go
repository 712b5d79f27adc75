package accounting

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// The child sink process: run by the test binary itself when childEnv is set.
const (
	childEnv     = "HERALD_ACCOUNTING_CHILD_SINK"
	childNATSEnv = "HERALD_ACCOUNTING_CHILD_NATS"
	childDSNEnv  = "HERALD_ACCOUNTING_CHILD_DSN"
	childSignal  = "BATCH STORED, NOT ACKED"
)

// runChildSink runs the accounting service against the parent's NATS and
// ClickHouse; after its first insert it reports on stdout and freezes before
// acking, waiting to be killed.
func runChildSink() int {
	nc, err := nats.Connect(os.Getenv(childNATSEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	js, _ := jetstream.New(nc)
	cfg := testConfig(os.Getenv(childDSNEnv))
	cfg.AckWait = time.Second
	cfg.afterInsert = func(string, int) {
		fmt.Println(childSignal)
		select {}
	}
	s, err := New(cfg, service.Deps{NC: nc, JS: js, Log: zerolog.New(os.Stderr)})
	if err == nil {
		err = s.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

// listeningBus is a JetStream other processes can reach over TCP.
func listeningBus(t *testing.T) (*heraldtest.Bus, string) {
	srv, err := embedded.Start(embedded.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	b := &heraldtest.Bus{Server: srv}
	b.NC, b.JS = b.Connect(t, "test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, bus.Ensure(ctx, b.JS, 1))
	return b, srv.ClientURL()
}

func TestSinkKilledBetweenInsertAndAckCountsEveryEventOnce(t *testing.T) {
	b, url := listeningBus(t)
	dsn := testDSN(t)
	evs := manyEvents("crash", 400)
	publishUsage(t, b.JS, "", evs...)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1", childNATSEnv+"="+url, childDSNEnv+"="+dsn)
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	stderr, err := os.CreateTemp(t.TempDir(), "child-stderr")
	require.NoError(t, err)
	child.Stderr = stderr
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		out, _ := os.ReadFile(stderr.Name())
		t.Fatalf("child sink: %v\n%s", err, out)
	}
	require.Equal(t, childSignal+"\n", line)
	require.NoError(t, child.Process.Kill())
	_ = child.Wait()

	stored := scalar(t, dsn, "SELECT count() FROM usage_events")
	require.Positive(t, stored, "the killed sink had stored its batch")
	require.Equal(t, uint64(400), streamMessages(t, b.JS, bus.StreamUsage), "but acked none of it")

	cfg := testConfig(dsn)
	cfg.AckWait = time.Second // the killed sink's batch comes back after this
	startService(t, b, cfg)
	waitDrained(t, b.JS, bus.StreamUsage)
	rep, err := QueryCost(context.Background(), dsn, CostQuery{By: "day"})
	require.NoError(t, err)
	require.Equal(t, uint64(400), rep.Total.Calls)
	require.Equal(t, uint64(400*100), rep.Total.CostNanoUSD)
	require.Equal(t, uint64(400), scalar(t, dsn, "SELECT sum(calls) FROM usage_by_session"))
}

func TestTwoSinksAtOnceCountEveryEventOnce(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	for range 2 {
		cfg := testConfig(dsn)
		cfg.BatchSize = 50
		startService(t, b, cfg)
	}
	// Each event is published three times under different message ids, as
	// a publisher retrying past the duplicate window would, from three
	// publishers at once, so copies land in batches of both sinks.
	evs := manyEvents("pair", 300)
	var wg sync.WaitGroup
	for _, suffix := range []string{"", ":retry", ":retry2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for _, e := range evs {
				_ = bus.PublishProto(ctx, b.JS, bus.UsageSubject(e.Tenant), e.EventId+suffix, e)
			}
		}()
	}
	wg.Wait()
	waitDrained(t, b.JS, bus.StreamUsage)
	rep, err := QueryCost(context.Background(), dsn, CostQuery{By: "model"})
	require.NoError(t, err)
	require.Equal(t, uint64(300), rep.Total.Calls)
	require.Equal(t, uint64(300), scalar(t, dsn, "SELECT sum(calls) FROM usage_hourly"))
	require.Equal(t, uint64(300), scalar(t, dsn, "SELECT count() FROM usage_events"))
}
