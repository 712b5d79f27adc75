package memory

import (
	"path/filepath"
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// A tombstone (herald sessions delete) takes the session out of the index,
// for good across a save and load; an id used again starts afresh.
func TestTombstoneMakesTheIndexForgetASession(t *testing.T) {
	ix := NewIndex()
	seq := uint64(0)
	add := func(sid string, msgs ...*heraldpb.ChatMessage) {
		for i, m := range msgs {
			seq++
			ix.Add(&heraldpb.TranscriptEntry{SessionId: sid, Index: int32(i), Message: m}, seq)
		}
	}
	add("gone", conversation("the pineapple ledger")...)
	add("kept", conversation("the pineapple farm")...)
	require.Len(t, ix.Search("pineapple", 10, ""), 2)

	seq++
	ix.Add(&heraldpb.TranscriptEntry{SessionId: "gone", Index: -1, Deleted: true}, seq)
	hits := ix.Search("pineapple", 10, "")
	require.Len(t, hits, 1)
	require.Equal(t, "kept", hits[0].SessionID)
	require.Empty(t, ix.Search("ledger", 10, ""), "no term of the forgotten session matches")
	for _, h := range ix.Search("", 10, "") {
		require.NotEqual(t, "gone", h.SessionID, "nor is it listed as a recent session")
	}
	require.Equal(t, seq, ix.LastSeq, "the tombstone counts as read")

	path := filepath.Join(t.TempDir(), "index.gob")
	require.NoError(t, ix.Save(path))
	loaded, err := LoadIndex(path)
	require.NoError(t, err)
	require.Len(t, loaded.Search("pineapple", 10, ""), 1)

	add("gone", conversation("the ledger, again")...)
	hits = ix.Search("ledger", 10, "")
	require.Len(t, hits, 1, "the id used again is a new session")
	require.Equal(t, "gone", hits[0].SessionID)
}
