package loop

import (
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func chainOf(msgs ...*heraldpb.ChatMessage) uint64 {
	c := uint64(0)
	for _, m := range msgs {
		c = chainNext(c, m)
	}
	return c
}

// A request carries only the transcript entries its session's previous
// request did not cover; anything that is not the stored transcript (a
// scaffold, an edited message) travels as it is.
func TestRequestRefersToTheTranscriptAndCarriesOnlyWhatIsNew(t *testing.T) {
	sys := &heraldpb.ChatMessage{Role: "system", Content: "be brief"}
	user := &heraldpb.ChatMessage{Role: "user", Content: "list files"}
	call := &heraldpb.ChatMessage{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: "c1", Name: "ls", Arguments: "{}"}}}
	result := &heraldpb.ChatMessage{Role: "tool", ToolCallId: "c1", Content: "a.txt"}
	scaffold := &heraldpb.ChatMessage{Role: "user", Content: "keep going", Scaffolding: true}

	st := &State{SessionID: "s1"}
	first := &txn{st: st, msgs: []*heraldpb.ChatMessage{sys, user}, baseChain: chainOf(sys, user), appended: []*heraldpb.ChatMessage{call}}
	ref, rest := first.transcriptRef([]*heraldpb.ChatMessage{sys, user, call, scaffold})
	require.Equal(t, "s1", ref.GetLogId())
	require.Equal(t, int32(0), ref.GetFrom(), "the first request carries the whole transcript")
	require.Equal(t, []*heraldpb.ChatMessage{sys, user, call}, ref.GetEntries())
	require.Equal(t, chainOf(sys, user, call), ref.GetChain())
	require.Equal(t, []*heraldpb.ChatMessage{scaffold}, rest)

	next := &txn{st: st, msgs: []*heraldpb.ChatMessage{sys, user, call}, baseChain: chainOf(sys, user, call), appended: []*heraldpb.ChatMessage{result}}
	ref, rest = next.transcriptRef([]*heraldpb.ChatMessage{sys, user, call, result})
	require.Equal(t, int32(3), ref.GetFrom(), "the next carries only what is new")
	require.Equal(t, chainOf(sys, user, call), ref.GetFromChain())
	require.Equal(t, []*heraldpb.ChatMessage{result}, ref.GetEntries())
	require.Equal(t, chainOf(sys, user, call, result), ref.GetChain())
	require.Empty(t, rest)

	// the previous request's point is not on this transcript's chain: all again
	st.SentRef = &SentRef{Log: "s1", Len: 3, Chain: 42}
	ref, _ = next.transcriptRef([]*heraldpb.ChatMessage{sys, user, call, result})
	require.Equal(t, int32(0), ref.GetFrom())
	require.Len(t, ref.GetEntries(), 4)

	// a committed message edited for this call (recall, a hook): no reference
	edited := &heraldpb.ChatMessage{Role: "user", Content: "recalled\n\nlist files"}
	ref, rest = next.transcriptRef([]*heraldpb.ChatMessage{sys, edited, call, result})
	require.Nil(t, ref)
	require.Equal(t, []*heraldpb.ChatMessage{sys, edited, call, result}, rest)
}

// A hook's context edits one message of a copied request: the messages
// before it are still the transcript's, and the request still refers to
// them (the first request of a turn, whose user message is new). An edit of
// a message committed earlier leaves nothing to refer to: the request
// carries its history whole, as before.
func TestRequestEditedByAHookStillRefersToTheUneditedTranscript(t *testing.T) {
	sys := &heraldpb.ChatMessage{Role: "system", Content: "be brief"}
	user := &heraldpb.ChatMessage{Role: "user", Content: "list files"}
	orig := []*heraldpb.ChatMessage{sys, user}
	edited := []*heraldpb.ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "plugin context\n\nlist files"}}
	tx := &txn{st: &State{SessionID: "s1"}, msgs: []*heraldpb.ChatMessage{sys}, baseChain: chainOf(sys),
		appended: []*heraldpb.ChatMessage{user}}
	ref, rest := tx.transcriptRef(sameValues(edited, orig))
	require.NotNil(t, ref)
	require.Equal(t, []*heraldpb.ChatMessage{sys}, ref.GetEntries(), "the transcript up to the edited message")
	require.Equal(t, chainOf(sys), ref.GetChain())
	require.Equal(t, []*heraldpb.ChatMessage{edited[1]}, rest, "the edited message travels as it is")

	later := &txn{st: &State{SessionID: "s1"}, msgs: []*heraldpb.ChatMessage{sys, user}, baseChain: chainOf(sys, user)}
	ref, rest = later.transcriptRef(sameValues(edited, orig))
	require.Nil(t, ref)
	require.Len(t, rest, 2)
	require.Equal(t, "plugin context\n\nlist files", rest[1].GetContent(), "carried whole, the edit included")
}
