package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestRequestBodyReadsItsPartsInOrder(t *testing.T) {
	parts := [][]byte{[]byte(`{"messages":[`), []byte(`{"a":1}`), comma, []byte(`{"b":2}`), []byte(`]}`)}
	b := &requestBody{parts: parts}
	for _, p := range parts {
		b.size += len(p)
	}
	want := string(bytes.Join(parts, nil))
	require.Equal(t, want, string(b.Bytes()))
	require.Equal(t, len(want), b.Len())
	require.NoError(t, iotest.TestReader(b, []byte(want)), "reads of every size, in order, then EOF")
	again, err := b.reopen()
	require.NoError(t, err)
	var out strings.Builder
	n, err := io.Copy(&out, again)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	require.Equal(t, want, out.String(), "a reopened body is whole again")
}

// TestSplicedBodiesGoOutWithTheirLength: a body sent in parts reaches the
// provider as the one encoded whole, with its Content-Length (not chunked),
// in every API mode.
func TestSplicedBodiesGoOutWithTheirLength(t *testing.T) {
	type seen struct {
		length   int64
		encoding []string
		body     string
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.ContentLength, r.TransferEncoding, string(body)})
		mu.Unlock()
		http.Error(w, `{"error":{"message":"recorded"}}`, http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	ep, err := newEndpoint(config.Provider{Provider: "local", Model: "m", BaseURL: srv.URL + "/v1"}, 0, nil)
	require.NoError(t, err)
	hc := newHTTPClient(0, 4)
	msgs := []*heraldpb.ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "read it"},
		{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: "c1", Name: "read_file", Arguments: `{"path":"a"}`}}},
		{Role: "tool", ToolCallId: "c1", Content: strings.Repeat("line\n", 20_000)}}
	type client interface {
		complete(context.Context, modelCall) (modelAnswer, error)
	}
	modes := []struct {
		name   string
		client client
		enc    splicingEncoder
	}{
		{"chat_completions", newChatClient(ep, hc), &chatEncoder{profile: ep.profile}},
		{"codex_responses", newResponsesClient(ep, hc), &responsesEncoder{profile: ep.profile}},
		{"anthropic_messages", newAnthropicClient(ep, hc), &anthropicEncoder{profile: ep.profile}},
	}
	for _, m := range modes {
		call := modelCall{model: "m", messages: msgs, wire: newWireSlots(len(msgs))}
		want, err := m.enc.whole(call)
		require.NoError(t, err)
		sent, err := m.enc.encode(call)
		require.NoError(t, err)
		require.Greater(t, len(sent.parts), 1, "%s: the body is spliced from parts", m.name)
		mu.Lock()
		got = nil
		mu.Unlock()
		_, err = m.client.complete(context.Background(), call)
		require.Error(t, err, "the recorder refuses every call")
		mu.Lock()
		require.Len(t, got, 1, m.name)
		require.Equal(t, int64(len(want.Bytes())), got[0].length, "%s: Content-Length", m.name)
		require.Empty(t, got[0].encoding, "%s: not chunked", m.name)
		require.Equal(t, string(want.Bytes()), got[0].body, m.name)
		mu.Unlock()
	}
}
