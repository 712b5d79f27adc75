package toolrunner

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// FuzzToolCallRequest decodes herald.tool.call.<pool>.<sid> payloads as
// handle does: garbage is a Permanent error (dead-lettered), a call without
// a session, call id or tool is rejected with ErrMalformedCall, and for a
// well-formed call the arguments go through the same schema check every
// tool runs (decodeArgs): any arguments text is accepted or becomes a
// correctable error the model reads, never a panic.
// Seeds: testdata/fuzz/FuzzToolCallRequest.
func FuzzToolCallRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &heraldpb.ToolCallRequest{}
		if err := bus.Decode(data, req); err != nil {
			require.True(t, bus.IsPermanent(err))
			return
		}
		if err := checkCall(req); err != nil {
			require.ErrorIs(t, err, ErrMalformedCall)
			return
		}
		require.Len(t, strings.Split(bus.ToolResult(req.GetSessionId(), req.GetCallId()), "."), 5)
		spec, ok := toolspec.Lookup(req.GetTool())
		if !ok {
			spec, _ = toolspec.Lookup("write_file")
		}
		var dst map[string]any
		if err := decodeArgs(spec.Name, spec.Parameters, req.GetArguments(), &dst); err != nil {
			var te *toolError
			require.True(t, errors.As(err, &te), "argument errors are results the model reads: %v", err)
			require.True(t, te.correctable)
		}
	})
}

// FuzzInput decodes answers on herald.session.<sid>.input as ask does: a
// payload that is not an Input is ignored (the runner keeps waiting), and
// an answer is matched only by its request or call id.
// Seeds: testdata/fuzz/FuzzInput.
func FuzzInput(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var in proto.Input
		if json.Unmarshal(data, &in) != nil {
			return
		}
		if isAnswer(in, "r1", "c1") {
			require.True(t, in.RequestID == "r1" || (in.RequestID == "" && in.CallID == "c1"))
		}
		if in.Approved != nil {
			require.Equal(t, *in.Approved, approvedBy(in))
		}
	})
}
