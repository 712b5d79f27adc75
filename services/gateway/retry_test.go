package gateway

import (
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

var serverError = scripted.Reply{Status: 500, Body: `{"error":{"message":"the server had an error"}}`}

func TestTransientErrorsAreRetriedAndEachAttemptIsBilled(t *testing.T) {
	r := newRig(t, scripted.FailFirst(2, serverError, scripted.Conversation(scripted.Text("third time lucky"))))
	ev := r.watch("r1")
	resp := r.call(r.request("r1", "hello"))

	require.Empty(t, resp.GetError())
	require.Equal(t, "third time lucky", resp.GetMessage().GetContent())
	require.Equal(t, int32(3), resp.GetAttempts())
	require.Equal(t, 3, r.model.Calls())

	usage := r.usageEvents()
	require.Len(t, usage, 3)
	for i, u := range usage[:2] {
		require.Equal(t, StatusError, u.GetStatus())
		require.Equal(t, string(ClassServerError), u.GetErrorClass())
		require.Equal(t, int32(i+1), u.GetAttempt())
		require.Zero(t, u.GetUsage().GetInputTokens()+u.GetUsage().GetOutputTokens())
	}
	require.Equal(t, StatusOK, usage[2].GetStatus())
	require.Equal(t, resp.GetUsage().GetInputTokens(), usage[2].GetUsage().GetInputTokens())

	require.Eventually(t, func() bool { return len(ev.ofType(proto.EventRetry)) == 2 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, Stats{Calls: 1, Attempts: 3, Retries: 2}, r.svc.Stats())
	retry := ev.ofType(proto.EventRetry)[0]
	require.Equal(t, 1, retry.Attempt)
	require.Equal(t, string(ClassServerError), retry.Status)
	require.Contains(t, retry.Message, "retrying")
}

func TestRetriesStopAtAPIMaxRetries(t *testing.T) {
	r := newRig(t, scripted.Conversation(serverError), func(c *Config) { c.MaxAttempts = 4 })
	resp := r.call(r.request("r2", "hello"))

	require.Equal(t, string(ClassServerError), resp.GetErrorClass())
	require.Equal(t, int32(4), resp.GetAttempts())
	require.Equal(t, 4, r.model.Calls())
	require.Contains(t, resp.GetError(), "local (model m1)")
	require.Contains(t, resp.GetError(), "the server had an error")
	require.Contains(t, resp.GetError(), "after 4 attempts")
	require.Len(t, r.usageEvents(), 4)
	require.Equal(t, Stats{Calls: 1, Failed: 1, Attempts: 4, Retries: 3}, r.svc.Stats())
}

func TestRateLimitWaitsForRetryAfter(t *testing.T) {
	limited := scripted.Reply{Status: 429, Body: `{"error":{"message":"slow down"}}`, Header: map[string]string{"Retry-After-Ms": "300"}}
	r := newRig(t, scripted.FailFirst(1, limited, scripted.Conversation(scripted.Text("ok"))))
	resp := r.call(r.request("r3", "hello"))

	require.Empty(t, resp.GetError())
	require.Equal(t, int32(2), resp.GetAttempts())
	require.GreaterOrEqual(t, resp.GetLatencyMs(), int64(300), "the provider's Retry-After is honoured")
}

func TestAuthFailureFailsFastNamingTheProviderNotTheKey(t *testing.T) {
	key := "sk-live-0123456789abcdef"
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: ` + key + `"}}`}),
		func(c *Config) { c.Primary.APIKey = key; c.Primary.Provider = "openrouter" })
	resp := r.call(r.request("r4", "hello"))

	require.Equal(t, string(ClassAuth), resp.GetErrorClass())
	require.Equal(t, int32(1), resp.GetAttempts(), "auth errors are not retried")
	require.Contains(t, resp.GetError(), "openrouter")
	require.Contains(t, resp.GetError(), "Incorrect API key")
	require.NotContains(t, resp.GetError(), key)
	require.Equal(t, "Bearer "+key, r.model.Requests()[0].Header.Get("Authorization"), "the key is sent to the provider")
}

func TestRemoteProviderWithoutKeyIsAnAuthErrorBeforeAnyRequest(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("unused")), func(c *Config) {
		c.Fallbacks = []config.Provider{{Provider: "openai", Model: "gpt-4o-mini", BaseURL: "https://api.openai.invalid/v1"}}
		c.Primary.BaseURL = "https://api.openai.invalid/v1"
		c.Primary.Provider = "openai"
	})
	resp := r.call(r.request("r5", "hello"))
	require.Equal(t, string(ClassAuth), resp.GetErrorClass())
	require.Contains(t, resp.GetError(), "no API key")
	require.Zero(t, r.model.Calls())
}

func TestLocalEndpointNeedsNoKeyAndGetsNoOpenAICredentials(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-ambient-openai-key-0000")
	t.Setenv("OPENAI_ORG_ID", "org-ambient")
	r := newRig(t, scripted.Conversation(scripted.Text("local answer")))
	resp := r.call(r.request("r6", "hello"))
	require.Equal(t, "local answer", resp.GetMessage().GetContent())
	h := r.model.Requests()[0].Header
	require.NotContains(t, h.Get("Authorization"), "sk-ambient")
	require.Empty(t, h.Get("OpenAI-Organization"))
}

func TestContextOverflowIsReturnedForCompressionWithoutRetry(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 400,
		Body: `{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}`}))
	resp := r.call(r.request("r7", "hello"))
	require.Equal(t, string(ClassContextOverflow), resp.GetErrorClass())
	require.Equal(t, 1, r.model.Calls())
}

func TestGarbageFromTheProviderIsRetried(t *testing.T) {
	r := newRig(t, scripted.FailFirst(1, scripted.Reply{Raw: `<html><body>502 Bad Gateway</body></html>`},
		scripted.FailFirst(1, scripted.Reply{Content: "cut", CutAfter: 2, ChunkChars: 1},
			scripted.Conversation(scripted.Text("clean answer")))))
	req := r.request("r8", "hello")
	req.Stream = true
	resp := r.call(req)
	require.Empty(t, resp.GetError())
	require.Equal(t, "clean answer", resp.GetMessage().GetContent())
	require.Equal(t, int32(3), resp.GetAttempts())
}

func TestStalledStreamIsCutAsATimeoutAndRetried(t *testing.T) {
	r := newRig(t, scripted.FailFirst(1, scripted.Reply{Content: "never finishes", ChunkChars: 2, StallAfter: 3},
		scripted.Conversation(scripted.Text("second try"))), func(c *Config) { c.StreamIdleTimeout = 100 * time.Millisecond })
	ev := r.watch("r9")
	req := r.request("r9", "hello")
	req.Stream = true
	resp := r.call(req)
	require.Equal(t, "second try", resp.GetMessage().GetContent())
	require.Equal(t, int32(2), resp.GetAttempts())
	require.Eventually(t, func() bool { return len(ev.ofType(proto.EventRetry)) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, string(ClassTimeout), ev.ofType(proto.EventRetry)[0].Status)
}
