package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestOnlyTheToolRunnerTakesThePoolsReads: a pool's quick reads
// (read_file, search_files) wait on their own subject and consumer
// (toolreads-<pool>); the loop may publish them and the tool runner's user
// may create, read and acknowledge that consumer. Nobody else may take
// one (a read names a workspace path) or acknowledge it away unrun,
// tenants and clients included, nor publish a read for a runner to run.
func TestOnlyTheToolRunnerTakesThePoolsReads(t *testing.T) {
	s := startSecured(t)
	s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	loop := s.connect(t, "loop")
	read := bus.ToolRead(bus.DefaultPool, "s1")
	require.NoError(t, bus.Publish(ctx, loop.js, read, "", []byte("a read")), "the loop publishes a read")

	runner := s.connect(t, "toolrunner")
	cons, err := runner.js.CreateOrUpdateConsumer(ctx, bus.StreamToolCalls, jetstream.ConsumerConfig{
		Durable: bus.ToolReadsConsumer(bus.DefaultPool), FilterSubject: bus.ToolReadFilter(bus.DefaultPool),
		AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err, "the runner creates its pool's reads consumer")

	users := usersBut("toolrunner")
	next := "$JS.API.CONSUMER.MSG.NEXT." + bus.StreamToolCalls + "." + bus.ToolReadsConsumer(bus.DefaultPool)
	for _, u := range users {
		c := s.connect(t, u)
		require.NoError(t, c.nc.Publish(next, []byte(`{"batch":1}`)))
		c.requireDenied("publish", next)
		if u != "loop" {
			require.NoError(t, c.nc.Publish(read, []byte("a forged read")))
			c.requireDenied("publish", read)
		}
	}

	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
		require.NoError(t, m.DoubleAck(ctx), "the runner acknowledges a read")
	}
	require.Equal(t, []string{"a read"}, got, "the read waited for the runner, untouched")
}
