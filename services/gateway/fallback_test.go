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

func TestOverloadedPrimaryFallsBackWithoutRetrying(t *testing.T) {
	tune, _ := withBackup(t, scripted.Conversation(scripted.Text("backup answer")))
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}), tune)
	resp := r.call(r.request("f3", "hello"))
	require.Equal(t, "backup answer", resp.GetMessage().GetContent())
	require.Equal(t, 1, r.model.Calls())
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
