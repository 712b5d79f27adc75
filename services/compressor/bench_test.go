package compressor

import (
	"context"
	"fmt"
	"testing"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// megabyteHistory is a 1 MB agent history: 250 tool steps with 4 KB outputs.
func megabyteHistory() []*heraldpb.ChatMessage {
	return agentHistory("Refactor the billing module and keep the tests green.", 250, 4000)
}

func historyBytes(msgs []*heraldpb.ChatMessage) int {
	n := 0
	for _, m := range msgs {
		n += messageChars(m)
	}
	return n
}

// BenchmarkPass1And2 measures the free passes on a 1 MB history: pruning
// old tool outputs and cutting head and tail around the middle.
func BenchmarkPass1And2(b *testing.B) {
	msgs := megabyteHistory()
	for b.Loop() {
		headEnd, tailStart := split(msgs, 3, 20)
		pruned, _ := pruneToolOutputs(msgs, headEnd, tailStart, 200)
		head, tail := pruned[:headEnd], pruned[tailStart:]
		_ = append(append(append([]*heraldpb.ChatMessage(nil), head...), bridge(head, tail, "summary")...), tail...)
	}
	b.ReportMetric(float64(historyBytes(msgs))/1e6, "MB")
}

// BenchmarkCompressDeterministic measures a whole compression of 1 MB with
// the deterministic summary (what runs when the model's summary fails).
func BenchmarkCompressDeterministic(b *testing.B) {
	msgs := megabyteHistory()
	c := &compressor{cfg: noModelConfig(), summarize: func(context.Context, *heraldpb.CompressRequest, string, []*heraldpb.ChatMessage, string) (string, spend, error) {
		return "", spend{}, ErrSummaryFailed
	}}
	req := &heraldpb.CompressRequest{RequestId: "r", SessionId: "s", Messages: msgs, ContextWindow: 128_000, Reason: ReasonOverflow}
	for b.Loop() {
		c.compress(context.Background(), req)
	}
}

// BenchmarkCompressWithScriptedModel measures a 1 MB compression request
// end to end over the bus, pass 3 answered by the scripted model over HTTP.
func BenchmarkCompressWithScriptedModel(b *testing.B) {
	bus := heraldtest.StartBus(b)
	startModelHop(b, bus, func(*scripted.Request) scripted.Reply { return scripted.Text(modelSummary) })
	startService(b, bus, modelConfig())
	msgs := megabyteHistory()
	for i := 0; b.Loop(); i++ {
		request(b, bus, &heraldpb.CompressRequest{RequestId: fmt.Sprintf("bench-%d", i), SessionId: "bench",
			Messages: msgs, ContextWindow: 128_000, Reason: ReasonOverflow})
	}
}
