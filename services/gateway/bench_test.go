package gateway

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
	protobuf "google.golang.org/protobuf/proto"
)

// BenchmarkGatewayAddedLatency measures what the gateway adds to a model
// call: a request published on the bus until its response arrives on the
// bus, beside the same call made directly to the same zero-latency scripted
// server with the same HTTP client, interleaved in one run.
//
//	go test ./services/gateway -run '^$' -bench GatewayAddedLatency -benchtime 2000x
func BenchmarkGatewayAddedLatency(b *testing.B) {
	r := newRig(b, scripted.Conversation(scripted.Text("pong")))
	ep := r.svc.endpoints[0]
	client := r.svc.clients[0]
	call := modelCall{model: ep.model, messages: []*heraldpb.ChatMessage{{Role: "user", Content: "ping"}}}

	reply := bus.LLMResponse(bus.OwnerLoop, "bench")
	sub, err := r.bus.NC.SubscribeSync(reply)
	require.NoError(b, err)
	defer func() { _ = sub.Unsubscribe() }()
	ctx := context.Background()

	direct := make([]time.Duration, 0, b.N)
	viaBus := make([]time.Duration, 0, b.N)
	viaDirect := func() {
		t0 := time.Now()
		_, err := client.complete(ctx, call)
		direct = append(direct, time.Since(t0))
		require.NoError(b, err)
	}
	throughBus := func(i int) {
		req := &heraldpb.LLMRequest{RequestId: fmt.Sprintf("bench:%d", i), SessionId: "bench", TaskId: "bench",
			ReplySubject: reply, Messages: call.messages, Step: int32(i)}
		data, err := protobuf.Marshal(req)
		require.NoError(b, err)
		t0 := time.Now()
		require.NoError(b, bus.Publish(ctx, r.bus.JS, bus.LLMRequest("bench"), req.RequestId, data))
		msg, err := sub.NextMsg(5 * time.Second)
		viaBus = append(viaBus, time.Since(t0))
		require.NoError(b, err)
		resp := &heraldpb.LLMResponse{}
		require.NoError(b, bus.Decode(msg.Data, resp))
		require.Equal(b, req.RequestId, resp.GetRequestId())
	}
	// Alternate blocks of each kind: both see the same background load, and
	// neither measures the other's trailing work (acks, usage storage).
	const block = 50
	b.ResetTimer()
	for i := 0; i < b.N; i += block {
		n := min(block, b.N-i)
		for range n {
			viaDirect()
		}
		for j := range n {
			throughBus(i + j)
		}
	}
	b.StopTimer()
	p := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(direct, 0.5), "direct-p50-ms")
	b.ReportMetric(p(direct, 0.99), "direct-p99-ms")
	b.ReportMetric(p(viaBus, 0.5), "bus-p50-ms")
	b.ReportMetric(p(viaBus, 0.99), "bus-p99-ms")
	b.ReportMetric(p(viaBus, 0.5)-p(direct, 0.5), "added-p50-ms")
	b.ReportMetric(p(viaBus, 0.99)-p(direct, 0.99), "added-p99-ms")
}
