package gateway

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// TestProviderFailuresAreClassified sends a real HTTP request for each way a
// provider can fail and checks the class the gateway gives it.
func TestProviderFailuresAreClassified(t *testing.T) {
	model := startModel(t, scripted.Conversation(scripted.Text("ok")))
	hc := newHTTPClient(time.Minute, 4)
	cases := []struct {
		name      string
		reply     scripted.Reply
		stream    bool
		class     ErrorClass
		retryable bool
		compress  bool
	}{
		{"401 bad key", scripted.Reply{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: sk-abcdefghijklmnop"}}`}, false, ClassAuth, false, false},
		{"403 forbidden", scripted.Reply{Status: 403, Body: `{"error":{"message":"forbidden"}}`}, false, ClassAuth, false, false},
		{"429 rate limit", scripted.Reply{Status: 429, Body: `{"error":{"message":"Rate limit reached for requests"}}`}, false, ClassRateLimit, true, false},
		{"429 quota is billing", scripted.Reply{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}`}, false, ClassBilling, false, false},
		{"402 payment", scripted.Reply{Status: 402, Body: `{"error":{"message":"payment required"}}`}, false, ClassBilling, false, false},
		{"413 payload", scripted.Reply{Status: 413, Body: `request entity too large`}, false, ClassPayloadTooLarge, false, true},
		{"400 context length", scripted.Reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 128000 tokens","code":"context_length_exceeded"}}`}, false, ClassContextOverflow, false, true},
		{"400 anthropic prompt too long", scripted.Reply{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`}, false, ClassContextOverflow, false, true},
		{"404 model", scripted.Reply{Status: 404, Body: `{"error":{"message":"The model 'gpt-9' does not exist","code":"model_not_found"}}`}, false, ClassModelNotFound, false, false},
		{"400 content policy", scripted.Reply{Status: 400, Body: `{"error":{"message":"flagged by our safety system","code":"content_policy_violation"}}`}, false, ClassContentPolicy, false, false},
		{"400 bad request", scripted.Reply{Status: 400, Body: `{"error":{"message":"messages[0].role is invalid"}}`}, false, ClassInvalidRequest, false, false},
		{"408 timeout", scripted.Reply{Status: 408, Body: ``}, false, ClassTimeout, true, false},
		{"500 server", scripted.Reply{Status: 500, Body: `{"error":{"message":"internal error"}}`}, false, ClassServerError, true, false},
		{"502 HTML page", scripted.Reply{Status: 502, Body: `<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>`}, false, ClassServerError, true, false},
		{"503 unavailable", scripted.Reply{Status: 503, Body: `Service Unavailable`}, false, ClassOverloaded, true, false},
		{"529 overloaded", scripted.Reply{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, false, ClassOverloaded, true, false},
		{"504 gateway timeout", scripted.Reply{Status: 504, Body: `upstream timed out`}, false, ClassTimeout, true, false},
		{"200 invalid JSON", scripted.Reply{Raw: `{"id":"x","choices":[{"message":`}, false, ClassFormatError, true, false},
		{"200 HTML page", scripted.Reply{Raw: `<!doctype html><html><body>Login</body></html>`}, false, ClassFormatError, true, false},
		{"200 no choices", scripted.Reply{Raw: `{"id":"x","object":"chat.completion","choices":[]}`}, false, ClassFormatError, true, false},
		{"body cut mid-way", scripted.Reply{Content: "a long answer that never arrives whole", CutAfter: 1}, false, ClassNetwork, true, false},
		{"stream cut mid-way", scripted.Reply{Content: "a long answer that never arrives whole", ChunkChars: 3, CutAfter: 3}, true, ClassNetwork, true, false},
		{"stream of garbage", scripted.Reply{Raw: "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\n\ndata: [DONE]\n\n"}, true, ClassFormatError, true, false},
		{"stream without finish", scripted.Reply{Raw: "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"}, true, ClassFormatError, true, false},
		{"stream error event", scripted.Reply{Raw: "data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}\n\n"}, true, ClassOverloaded, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model.SetScript(scripted.Conversation(tc.reply))
			ep, err := newEndpoint(config.Provider{Provider: "local", Model: "m", BaseURL: model.URL, APIKey: "sk-abcdefghijklmnop"}, 0, nil)
			require.NoError(t, err)
			_, err = newChatClient(ep, hc).complete(context.Background(), modelCall{model: "m", stream: tc.stream,
				messages: []*heraldpb.ChatMessage{{Role: "user", Content: "hi"}}, onDelta: func(string) {}})
			require.Error(t, err)
			ae := classify(err)
			require.Equal(t, tc.class, ae.class, "error: %v", err)
			require.Equal(t, tc.retryable, ae.policy.Retryable)
			require.Equal(t, tc.compress, ae.policy.Compress)
			require.NotContains(t, redact(ae.Error(), ep.apiKey), "sk-abcdefghijklmnop")
		})
	}
}

func TestTransportFailuresAreClassified(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String() + "/v1"
	require.NoError(t, ln.Close())
	slow := startModel(t, scripted.Conversation(scripted.Reply{Content: "late", Delay: 5 * time.Second}))
	hc := newHTTPClient(time.Minute, 4)
	ask := func(base string, ctx context.Context) error {
		ep, err := newEndpoint(config.Provider{Provider: "local", Model: "m", BaseURL: base}, 0, nil)
		require.NoError(t, err)
		_, err = newChatClient(ep, hc).complete(ctx, modelCall{model: "m", messages: []*heraldpb.ChatMessage{{Role: "user", Content: "hi"}}})
		return err
	}
	err = ask(closed, context.Background())
	require.Equal(t, ClassNetwork, Classify(err), "%v", err)
	require.Contains(t, classify(err).detail, "connection refused")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.Equal(t, ClassTimeout, Classify(ask(slow.URL, ctx)))
}

func TestRetryAfterIsHonouredUpToTwoMinutes(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := func(k, v string) http.Header { x := http.Header{}; x.Set(k, v); return x }
	require.Equal(t, 7*time.Second, retryAfter(h("Retry-After", "7"), now))
	require.Equal(t, 1500*time.Millisecond, retryAfter(h("Retry-After", "1.5"), now))
	require.Equal(t, 250*time.Millisecond, retryAfter(h("Retry-After-Ms", "250"), now))
	require.Equal(t, 30*time.Second, retryAfter(h("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat)), now))
	require.Zero(t, retryAfter(h("Retry-After", "600"), now), "beyond 120 s the backoff applies")
	require.Zero(t, retryAfter(h("Retry-After", "soon"), now))
	require.Zero(t, retryAfter(http.Header{}, now))
}

func TestBackoffGrowsWithJitterAndIsCapped(t *testing.T) {
	base, max := 5*time.Second, 120*time.Second
	for attempt, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 6: 120 * time.Second, 30: 120 * time.Second} {
		for range 50 {
			d := Backoff(attempt, base, max)
			require.GreaterOrEqual(t, d, want)
			require.LessOrEqual(t, d, want+want/2)
		}
	}
}

func TestSecretsAreRedactedFromMessages(t *testing.T) {
	msg := redact("401 Incorrect API key provided: sk-proj-abcdefghijkl and my-own-key-123", "my-own-key-123")
	require.NotContains(t, msg, "abcdefghijkl")
	require.NotContains(t, msg, "my-own-key-123")
	require.Contains(t, msg, "Incorrect API key provided")
}
