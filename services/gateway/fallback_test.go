package gateway

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// withBackup adds a fallback provider served by its own scripted server.
func withBackup(t *testing.T, script scripted.Script) (func(*Config), *scripted.Server) {
	backup := startModel(t, script)
	return func(c *Config) {
		c.Fallbacks = append(c.Fallbacks, config.Provider{Provider: "backup", Model: "m2", BaseURL: backup.URL})
	}, backup
}

func TestNonRetryableErrorFallsBackAtOnce(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Text("from the backup")))
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 401, Body: `{"error":{"message":"bad key"}}`}), tune)
	ev := r.watch("f1")
	resp := r.call(r.request("f1", "hello"))

	require.Empty(t, resp.GetError())
	require.Equal(t, "from the backup", resp.GetMessage().GetContent())
	require.True(t, resp.GetIsFallback())
	require.Equal(t, "backup", resp.GetProvider())
	require.Equal(t, "m2", resp.GetModel())
	require.Equal(t, int32(2), resp.GetAttempts())
	require.Equal(t, 1, r.model.Calls())
	require.Equal(t, "m2", backup.Requests()[0].Model)

	usage := r.usageEvents()
	require.Len(t, usage, 2)
	require.False(t, usage[0].GetIsFallback())
	require.Equal(t, string(ClassAuth), usage[0].GetErrorClass())
	require.True(t, usage[1].GetIsFallback())
	require.Equal(t, "backup", usage[1].GetProvider())
	require.Equal(t, "m2", usage[1].GetModel())

	require.Eventually(t, func() bool { return len(ev.ofType(proto.EventFallback)) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, int64(1), r.svc.Stats().Fallbacks)
	fb := ev.ofType(proto.EventFallback)[0]
	require.Equal(t, "backup", fb.Provider)
	require.Contains(t, fb.Message, "switching to fallback")
}

func TestExhaustedRetriesFallBack(t *testing.T) {
	tune, _ := withBackup(t, scripted.Conversation(scripted.Text("backup answer")))
	r := newRig(t, scripted.Conversation(serverError), tune)
	resp := r.call(r.request("f2", "hello"))
	require.Equal(t, "backup answer", resp.GetMessage().GetContent())
	require.Equal(t, 3, r.model.Calls(), "three attempts on the primary first")
	require.Equal(t, int32(4), resp.GetAttempts())
}

// anthropicOverloaded is the body Anthropic documents for HTTP 529
// (https://docs.anthropic.com/en/api/errors: overloaded_error, "the API is
// temporarily overloaded").
const anthropicOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

func anthropicPrimary(c *Config) {
	c.Primary = config.Provider{Provider: "anthropic", Model: "claude-haiku-4-5", BaseURL: c.Primary.BaseURL, APIKey: "k"}
}

func TestOverloadedPrimaryRetriesThenFallsBack(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Text("backup answer")))
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 529, Body: anthropicOverloaded}), anthropicPrimary, tune,
		func(c *Config) { c.MaxAttempts = 5 })
	ev := r.watch("f3")
	resp := r.call(r.request("f3", "hello"))

	require.Empty(t, resp.GetError())
	require.Equal(t, "backup answer", resp.GetMessage().GetContent())
	require.True(t, resp.GetIsFallback())
	require.Equal(t, OverloadedAttempts, r.model.Calls(), "the first attempt and two retries, not the whole budget of 5")
	require.Equal(t, 1, backup.Calls())
	require.Equal(t, int32(OverloadedAttempts+1), resp.GetAttempts())

	require.Eventually(t, func() bool { return len(ev.ofType(proto.EventFallback)) == 1 }, 5*time.Second, 5*time.Millisecond)
	retries := ev.ofType(proto.EventRetry)
	require.Len(t, retries, OverloadedAttempts-1)
	for _, e := range retries {
		require.Equal(t, "anthropic", e.Provider)
		require.Equal(t, string(ClassOverloaded), e.Status)
	}
	require.Equal(t, string(ClassOverloaded), ev.ofType(proto.EventFallback)[0].Status)
	usage := r.usageEvents()
	require.Len(t, usage, OverloadedAttempts+1, "every attempt is billed")
	for _, u := range usage[:OverloadedAttempts] {
		require.Equal(t, string(ClassOverloaded), u.GetErrorClass())
	}
}

func TestOverloadedPrimaryThatRecoversKeepsTheCall(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Text("backup answer")))
	r := newRig(t, scripted.FailFirst(OverloadedAttempts-1, scripted.Reply{Status: 529, Body: anthropicOverloaded},
		scripted.Conversation(scripted.Text("primary answer"))), anthropicPrimary, tune)
	resp := r.call(r.request("f3b", "hello"))
	require.Equal(t, "primary answer", resp.GetMessage().GetContent())
	require.False(t, resp.GetIsFallback())
	require.Equal(t, OverloadedAttempts, r.model.Calls())
	require.Zero(t, backup.Calls(), "a brief overload does not move the call")
}

func TestOverloadedWaitsTheProvidersRetryAfter(t *testing.T) {
	tune, _ := withBackup(t, scripted.Conversation(scripted.Text("backup answer")))
	slow := scripted.Reply{Status: 529, Body: anthropicOverloaded, Header: map[string]string{"retry-after-ms": "40"}}
	r := newRig(t, scripted.FailFirst(1, slow, scripted.Conversation(scripted.Text("primary answer"))), anthropicPrimary, tune)
	ev := r.watch("f3c")
	resp := r.call(r.request("f3c", "hello"))
	require.Equal(t, "primary answer", resp.GetMessage().GetContent())
	require.Eventually(t, func() bool { return len(ev.ofType(proto.EventRetry)) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Contains(t, ev.ofType(proto.EventRetry)[0].Message, "retrying in 40ms ", "the provider's delay, not the 1–5 ms backoff")
}

func TestOverloadedWithoutFallbackSpendsTheWholeBudget(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 529, Body: anthropicOverloaded}), anthropicPrimary,
		func(c *Config) { c.MaxAttempts = 5 })
	resp := r.call(r.request("f3d", "hello"))
	require.Equal(t, string(ClassOverloaded), resp.GetErrorClass())
	require.Equal(t, 5, r.model.Calls(), "agent.api_max_retries attempts")
	require.Contains(t, resp.GetError(), "after 5 attempts")
}

func TestSmallRetryBudgetBoundsTheOverloadedRetries(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Text("backup answer")))
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 529, Body: anthropicOverloaded}), anthropicPrimary, tune,
		func(c *Config) { c.MaxAttempts = 1 })
	resp := r.call(r.request("f3e", "hello"))
	require.Equal(t, "backup answer", resp.GetMessage().GetContent())
	require.Equal(t, 1, r.model.Calls(), "api_max_retries: 1 means one try")
	require.Equal(t, 1, backup.Calls())
}

func TestOpenAIOverloaded503RetriesThenFallsBack(t *testing.T) {
	tune, _ := withBackup(t, scripted.Conversation(scripted.Text("backup answer")))
	// OpenAI documents 503 "The engine is currently overloaded, please try again
	// later", here in its usual error shape
	// (https://platform.openai.com/docs/guides/error-codes)
	overloaded := scripted.Reply{Status: 503, Body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`}
	r := newRig(t, scripted.Conversation(overloaded), tune)
	resp := r.call(r.request("f3f", "hello"))
	require.Equal(t, "backup answer", resp.GetMessage().GetContent())
	require.Equal(t, OverloadedAttempts, r.model.Calls())
}

func TestWholeChainFailingReportsTheLastError(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Reply{Status: 404, Body: `{"error":{"message":"The model m2 does not exist"}}`}))
	r := newRig(t, scripted.Conversation(serverError), tune)
	resp := r.call(r.request("f4", "hello"))
	require.Equal(t, string(ClassModelNotFound), resp.GetErrorClass())
	require.Contains(t, resp.GetError(), "backup (model m2)")
	require.True(t, resp.GetIsFallback())
	require.Equal(t, 1, backup.Calls())
}

func TestFallbackLastsForTheTurnAndThePrimaryReturnsNextTurn(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Text("backup")))
	r := newRig(t, scripted.FailFirst(3, serverError, scripted.Conversation(scripted.Text("primary"))), tune)

	turn1 := r.call(r.request("f5", "hello"))
	require.True(t, turn1.GetIsFallback())
	again := r.request("f5", "hello")
	require.Equal(t, "backup", r.call(again).GetMessage().GetContent(), "the rest of the turn stays on the fallback")
	require.Equal(t, 3, r.model.Calls())

	next := r.request("f5", "hello")
	next.Turn = 2
	resp := r.call(next)
	require.False(t, resp.GetIsFallback())
	require.Equal(t, "primary", resp.GetMessage().GetContent())
	require.Equal(t, 2, backup.Calls())
}

func TestRateLimitedPrimaryCoolsDown(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Text("backup")))
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 429, Body: `{"error":{"message":"rate limited"}}`}), tune,
		func(c *Config) { c.MaxAttempts = 1 })
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	r.svc.health.mu.Lock()
	r.svc.health.now = func() time.Time { return time.Unix(0, clock.Load()) }
	r.svc.health.mu.Unlock()

	require.True(t, r.call(r.request("f6", "hello")).GetIsFallback())
	require.Equal(t, 1, r.model.Calls())

	other := r.request("f7", "another session")
	require.True(t, r.call(other).GetIsFallback())
	require.Equal(t, 1, r.model.Calls(), "a rate-limited primary is skipped while it cools down")

	clock.Add(int64(61 * time.Second))
	later := r.request("f8", "a minute later")
	require.True(t, r.call(later).GetIsFallback())
	require.Equal(t, 2, r.model.Calls(), "after 60 s the primary is tried again")
	require.Equal(t, 3, backup.Calls())
}

func TestPreferFallbackSkipsThePrimary(t *testing.T) {
	tune, backup := withBackup(t, scripted.Conversation(scripted.Text("backup")))
	r := newRig(t, scripted.Conversation(scripted.Text("")), tune)
	req := r.request("f9", "hello")
	req.PreferFallback = true
	resp := r.call(req)
	require.True(t, resp.GetIsFallback())
	require.Equal(t, "backup", resp.GetMessage().GetContent())
	require.Zero(t, r.model.Calls())
	require.Equal(t, 1, backup.Calls())
}
