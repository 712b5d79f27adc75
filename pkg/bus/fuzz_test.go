package bus_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

// internalTypes are the protobuf messages carried by Herald's internal
// subjects; FuzzDecode picks one by its kind argument.
var internalTypes = []func() gproto.Message{
	func() gproto.Message { return &heraldpb.LLMRequest{} },
	func() gproto.Message { return &heraldpb.LLMResponse{} },
	func() gproto.Message { return &heraldpb.ToolCallRequest{} },
	func() gproto.Message { return &heraldpb.ToolResult{} },
	func() gproto.Message { return &heraldpb.CompressRequest{} },
	func() gproto.Message { return &heraldpb.CompressResult{} },
	func() gproto.Message { return &heraldpb.UsageEvent{} },
	func() gproto.Message { return &heraldpb.ToolEvent{} },
	func() gproto.Message { return &heraldpb.TranscriptEntry{} },
}

// FuzzDecode feeds arbitrary bytes to bus.Decode, the decoder every consumer
// of an internal subject uses, for each internal type: it never panics, a
// failure is Permanent (the worker dead-letters it at once) and names the
// type, and a message it accepts encodes again to an equal message (unknown
// fields of a newer sender are kept, not lost). Seeds: testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		m := internalTypes[int(kind)%len(internalTypes)]()
		name := fmt.Sprintf("%T", m)
		err := bus.Decode(data, m)
		if err != nil {
			require.True(t, bus.IsPermanent(err), "a malformed %s must be dead-lettered, not retried", name)
			require.True(t, strings.Contains(err.Error(), strings.TrimPrefix(name, "*")), "reason %q names the type", err)
			return
		}
		again, err := gproto.Marshal(m)
		require.NoError(t, err, "an accepted %s encodes again", name)
		back := internalTypes[int(kind)%len(internalTypes)]()
		require.NoError(t, bus.Decode(again, back))
		require.True(t, gproto.Equal(m, back), "%s changed through a re-encode", name)
	})
}
