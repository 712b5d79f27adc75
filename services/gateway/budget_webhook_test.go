package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// receiver is a webhook endpoint as a user would write it: it checks the
// signature with its own copy of the secret and answers with the statuses
// it is told to (then 200).
type receiver struct {
	secret string
	mu     sync.Mutex
	status []int
	got    []proto.BudgetAlert
	ids    []string
	forged int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sig, ok := strings.CutPrefix(r.Header.Get(HeaderWebhookSignature), "sha256=")
	m := hmac.New(sha256.New, []byte(rc.secret))
	m.Write(body)
	want := m.Sum(nil)
	got, err := hex.DecodeString(sig)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !ok || err != nil || !hmac.Equal(got, want) {
		rc.forged++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var a proto.BudgetAlert
	if json.Unmarshal(body, &a) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.got = append(rc.got, a)
	rc.ids = append(rc.ids, r.Header.Get(HeaderWebhookAlertID))
	if len(rc.status) > 0 {
		code := rc.status[0]
		rc.status = rc.status[1:]
		w.WriteHeader(code)
		_, _ = w.Write([]byte("receiver is down"))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (rc *receiver) posts() ([]proto.BudgetAlert, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]proto.BudgetAlert(nil), rc.got...), append([]string(nil), rc.ids...)
}

// One call crosses 50 % of acme's day: the alert is POSTed, signed, to the
// webhook; the receiver fails twice and takes the third POST, which carries
// the same alert id.
func TestBudgetAlertIsPostedSignedAndRetried(t *testing.T) {
	rc := &receiver{secret: "whsec-test", status: []int{500, 503}}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	usage := &scripted.Usage{PromptTokens: 600_000}
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "x", Usage: usage}), func(c *Config) {
		c.Pricing = map[string]config.Price{"m1": {Input: 1}}
		c.Budgets = config.Budgets{Tenants: map[string]config.BudgetLimits{"acme": {Daily: 1}}, AlertThresholds: []float64{50},
			Webhook: config.BudgetWebhook{URL: hook.URL, Secret: "whsec-test", MaxAttempts: 4}}
		c.WebhookRetryDelays = []time.Duration{10 * time.Millisecond}
	})
	req := r.request("w1", "hello")
	req.Tenant = "acme"
	require.Empty(t, r.call(req).GetError())

	require.Eventually(t, func() bool { got, _ := rc.posts(); return len(got) == 3 }, 10*time.Second, 10*time.Millisecond)
	got, ids := rc.posts()
	for i, a := range got {
		require.Equal(t, "acme", a.Tenant)
		require.Equal(t, "daily", a.Window)
		require.Equal(t, 50.0, a.Threshold)
		require.InDelta(t, 0.6, a.Spent, 1e-9)
		require.Equal(t, 1.0, a.Limit)
		require.Equal(t, ids[0], ids[i], "every retry carries the alert's id")
	}
	require.NotEmpty(t, ids[0])
	require.Zero(t, rc.forged)
	require.Empty(t, heraldtest.DeadLetters(t, r.bus.JS, bus.StreamAlerts), "delivered on the third attempt")
}

// A receiver that never takes the alert (here: it holds another secret, so
// every signature fails) gets max_attempts POSTs; the alert is then
// dead-lettered with the reason, and kept on herald.alerts.budget.
func TestBudgetAlertIsDeadLetteredAfterMaxAttempts(t *testing.T) {
	rc := &receiver{secret: "the receiver's other secret"}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	usage := &scripted.Usage{PromptTokens: 600_000}
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "x", Usage: usage}), func(c *Config) {
		c.Pricing = map[string]config.Price{"m1": {Input: 1}}
		c.Budgets = config.Budgets{Tenants: map[string]config.BudgetLimits{"acme": {Daily: 1}}, AlertThresholds: []float64{50},
			Webhook: config.BudgetWebhook{URL: hook.URL, Secret: "whsec-test", MaxAttempts: 3}}
		c.WebhookRetryDelays = []time.Duration{10 * time.Millisecond}
	})
	req := r.request("w2", "hello")
	req.Tenant = "acme"
	require.Empty(t, r.call(req).GetError())

	require.Eventually(t, func() bool {
		return len(heraldtest.DeadLetters(t, r.bus.JS, bus.StreamAlerts)) == 1
	}, 10*time.Second, 10*time.Millisecond)
	dl := heraldtest.DeadLetters(t, r.bus.JS, bus.StreamAlerts)[0]
	require.Equal(t, bus.BudgetAlertsSubject, dl.Header.Get(bus.HeaderSubject))
	require.Contains(t, dl.Header.Get(bus.HeaderError), "failed 3 deliveries: POST "+hook.URL+": HTTP 401")
	var a proto.BudgetAlert
	require.NoError(t, json.Unmarshal(dl.Data, &a))
	require.Equal(t, 50.0, a.Threshold)
	rc.mu.Lock()
	require.Equal(t, 3, rc.forged, "max_attempts POSTs, none accepted")
	rc.mu.Unlock()
	require.Len(t, budgetAlertsOn(t, r.bus.JS), 1, "the alert itself is kept")
}
