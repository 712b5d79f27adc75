package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/nats-io/nats.go/jetstream"
)

// WebhookDurable is the consumer every gateway shares to POST budget
// alerts to budgets.webhook: each alert is POSTed by one of them.
const WebhookDurable = "budget-webhook"

// Webhook request headers: the HMAC-SHA256 of the body under the secret,
// hex, GitHub's form ("sha256=<hex>"), and the alert's id (the same on
// every retry of one alert, so a receiver can drop repeats).
const (
	HeaderWebhookSignature = "X-Herald-Signature"
	HeaderWebhookAlertID   = "X-Herald-Alert-Id"
)

// DefaultWebhookAttempts is how many times an alert is POSTed before it is
// dead-lettered, unless budgets.webhook.max_attempts says otherwise.
const DefaultWebhookAttempts = 5

// defaultWebhookDelays are the waits between attempts (the last repeats).
var defaultWebhookDelays = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}

// webhookTimeout bounds one POST.
const webhookTimeout = 10 * time.Second

// SignWebhook is the signature header value of body under secret.
func SignWebhook(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// webhook POSTs budget alerts from the ALERTS stream.
type webhook struct {
	cfg config.BudgetWebhook
	hc  *http.Client
}

func (s *Service) startWebhook(ctx context.Context) (*bus.Worker, error) {
	wh := s.cfg.Budgets.Webhook
	if wh.URL == "" {
		return nil, nil
	}
	attempts := wh.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultWebhookAttempts
	}
	delays := s.cfg.WebhookRetryDelays
	if len(delays) == 0 {
		delays = defaultWebhookDelays
	}
	h := &webhook{cfg: wh, hc: &http.Client{Timeout: webhookTimeout}}
	spec := bus.ConsumerSpec{Stream: bus.StreamAlerts, Durable: WebhookDurable, FilterSubjects: []string{bus.BudgetAlertsSubject},
		Concurrency: 4, MaxDeliver: attempts, RetryDelays: delays, AckWait: webhookTimeout + 5*time.Second, DeliverNew: true}
	return bus.StartWorker(ctx, s.js, spec, h.post, s.log.With().Str("part", "budget webhook").Logger())
}

// post sends one alert; an answer other than 2xx is an error, retried
// until the consumer's MaxDeliver, then dead-lettered with it as reason.
func (w *webhook) post(ctx context.Context, msg jetstream.Msg) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(msg.Data()))
	if err != nil {
		return bus.Permanent(fmt.Errorf("budget webhook: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "herald-budget-alerts")
	req.Header.Set(HeaderWebhookSignature, SignWebhook(w.cfg.Secret, msg.Data()))
	req.Header.Set(HeaderWebhookAlertID, msg.Headers().Get(jetstream.MsgIDHeader))
	resp, err := w.hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", w.cfg.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: HTTP %d: %s", w.cfg.URL, resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}
