package hooks

import (
	"context"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// What pre_tool_call costs a tool call: with nobody listening (a
// no-responders round trip once per QuietFor) and with a plugin answering.
func BenchmarkPreToolCall(b *testing.B) {
	bb := heraldtest.StartBus(b)
	call := ToolCall{SessionID: "s1", Tenant: "acme", Tool: "write_file", Arguments: ArgumentsJSON(`{"path":"a.txt","content":"x"}`)}
	c := New(bb.NC, Config{}, zerolog.Nop())
	b.Run("no_listener", func(b *testing.B) {
		for b.Loop() {
			if !c.MayCallTool(context.Background(), call).Allow {
				b.Fatal("refused")
			}
		}
	})
	pnc, _ := bb.Connect(b, "plugin")
	_, err := pnc.Subscribe(bus.HookPreToolCall(), func(m *nats.Msg) { _ = m.Respond([]byte(`{"allow": true}`)) })
	require.NoError(b, err)
	require.NoError(b, pnc.Flush())
	c = New(bb.NC, Config{}, zerolog.Nop()) // not resting after no_listener
	b.Run("plugin_answers", func(b *testing.B) {
		for b.Loop() {
			if !c.MayCallTool(context.Background(), call).Allow {
				b.Fatal("refused")
			}
		}
	})
}
