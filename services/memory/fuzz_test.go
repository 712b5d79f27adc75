package memory

import (
	"errors"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// FuzzMemoryCall decodes herald.memory.call.<sid> payloads as handleCall
// does: garbage is a Permanent error (dead-lettered); for a call with ids,
// the memory tool's arguments are decoded and, when valid, applied to a
// store: arbitrary arguments give an ErrInvalidArguments the model reads
// or a change that respects the store's limit, never a panic.
// Seeds: testdata/fuzz/FuzzMemoryCall.
func FuzzMemoryCall(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var req heraldpb.ToolCallRequest
		if err := bus.Decode(data, &req); err != nil {
			require.True(t, bus.IsPermanent(err))
			return
		}
		if req.CallId == "" || req.SessionId == "" {
			return // handleCall dead-letters it
		}
		a, err := decodeMemoryArgs(req.Arguments)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidArguments)
			return
		}
		if a.Action == "read" {
			return
		}
		const limit = 200
		entries := []string{"the user prefers tea", "the project is Herald"}
		next, note, err := applyAction(a, entries, limit)
		if err != nil {
			require.True(t, errors.Is(err, ErrLimitExceeded) || errors.Is(err, ErrNoMatch) || errors.Is(err, ErrAmbiguous), "%v", err)
			return
		}
		require.NotEmpty(t, note)
		require.LessOrEqual(t, joinedLen(next), max(limit, joinedLen(entries)))
	})
}

// FuzzTranscriptEntry decodes herald.session.<sid>.log entries as the
// search indexer does (a malformed entry is logged and skipped) and indexes
// them: any entry is indexed or ignored, the index stays searchable, and a
// repeated (session, index) is indexed once. Seeds: testdata/fuzz/FuzzTranscriptEntry.
func FuzzTranscriptEntry(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var e heraldpb.TranscriptEntry
		if err := bus.Decode(data, &e); err != nil {
			require.True(t, bus.IsPermanent(err))
			e = heraldpb.TranscriptEntry{}
		}
		ix := NewIndex()
		ix.Add(&e, 1)
		docs := len(ix.Docs)
		ix.Add(&e, 2)
		require.Equal(t, docs, len(ix.Docs), "a repeated entry is indexed once")
		require.LessOrEqual(t, len(ix.Search(e.GetMessage().GetContent(), 5, "")), 5)
		_ = ix.Search("", 5, "")
	})
}
