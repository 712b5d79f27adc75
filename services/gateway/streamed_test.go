package gateway

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

func TestStreamThatCompletesEmptyAnswersWithTheTextItStreamed(t *testing.T) {
	// The deltas carry the answer (and a memory-context span split across
	// them), while the closing response.completed lists no output at all.
	stream := responsesStreamWithoutOutput("The notes <memory-", "context>likes tea</memory-context>say ", "green tea.")
	r := newRig(t, scripted.Conversation(scripted.Reply{Raw: stream}), func(c *Config) { c.Primary.APIMode = ModeCodexResponses })
	ev := r.watch("p1")
	req := r.request("p1", "what do the notes say")
	req.Stream = true

	resp := r.call(req)

	require.Empty(t, resp.GetError())
	require.Equal(t, "The notes say green tea.", resp.GetMessage().GetContent(), "the answer is the text the user saw")
	require.Equal(t, "assistant", resp.GetMessage().GetRole())
	require.Equal(t, "stop", resp.GetFinishReason())
	require.Empty(t, resp.GetPartialContent(), "partial text belongs to failures only")
	require.Equal(t, int32(1), resp.GetAttempts())
	require.Equal(t, 1, r.model.Calls())
	require.Eventually(t, func() bool { return ev.text() == "The notes say green tea." }, 5*time.Second, 5*time.Millisecond)
}

func TestFailedStreamReportsTheTextOfItsLastAttempt(t *testing.T) {
	// cut streams "<who> <n> says the " (the role chunk and three 5-character
	// chunks) and drops the connection; n counts that server's requests.
	cut := func(who string) scripted.Script {
		var n atomic.Int32
		return func(*scripted.Request) scripted.Reply {
			return scripted.Reply{Content: fmt.Sprintf("%s %d says the answer is forty-two.", who, n.Add(1)), ChunkChars: 5, CutAfter: 4}
		}
	}
	unauthorized := scripted.Conversation(scripted.Reply{Status: 401, Body: `{"error":{"message":"bad key"}}`})
	cases := []struct {
		name    string
		backup  scripted.Script // nil: no fallback
		partial string
		class   ErrorClass
		seen    string // every delta of the call, in order
	}{
		{"retries on one provider", nil, "ABC 3 says the ", ClassNetwork, "ABC 1 says the ABC 2 says the ABC 3 says the "},
		{"fallback that streams too", cut("XYZ"), "XYZ 3 says the ", ClassNetwork,
			"ABC 1 says the ABC 2 says the ABC 3 says the XYZ 1 says the XYZ 2 says the XYZ 3 says the "},
		{"fallback that fails before streaming", unauthorized, "", ClassAuth, "ABC 1 says the ABC 2 says the ABC 3 says the "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tune []func(*Config)
			if tc.backup != nil {
				withB, _ := withBackup(t, tc.backup)
				tune = append(tune, withB)
			}
			r := newRig(t, cut("ABC"), tune...)
			ev := r.watch("p2")
			req := r.request("p2", "what is the answer")
			req.Stream = true

			resp := r.call(req)

			require.Equal(t, string(tc.class), resp.GetErrorClass())
			require.NotEmpty(t, resp.GetError())
			require.Equal(t, tc.partial, resp.GetPartialContent(), "what the user saw of the last attempt, once")
			require.Eventually(t, func() bool { return ev.text() == tc.seen }, 5*time.Second, 5*time.Millisecond,
				"the user saw %q", ev.text())
		})
	}
}

// responsesStreamWithoutOutput is a Responses API event stream that streams
// deltas as text and then completes with an empty output list.
func responsesStreamWithoutOutput(deltas ...string) string {
	var b strings.Builder
	event := func(typ, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data) }
	event("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"m1","output":[]}}`)
	for i, d := range deltas {
		event("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q}`, i+1, d))
	}
	event("response.completed", fmt.Sprintf(`{"type":"response.completed","sequence_number":%d,"response":{"id":"resp_1","object":"response","status":"completed","model":"m1","output":[],"usage":{"input_tokens":40,"output_tokens":6,"total_tokens":46}}}`, len(deltas)+1))
	return b.String()
}
