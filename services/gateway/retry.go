package gateway

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/heraldrun/herald/pkg/config"
)

// Backoff is Hermes' jittered exponential backoff:
// delay = min(base·2^(attempt−1), max) + uniform(0, 0.5·delay).
func Backoff(attempt int, base, max time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if d <= 0 {
		return 0
	}
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}

// retryDelay is how long to wait before the next attempt after ae: the
// provider's Retry-After when it gave one (≤ 120 s), else the backoff of the
// error's kind (rate limits back off on their own, slower schedule).
func retryDelay(r config.Retry, attempt int, ae *attemptError) time.Duration {
	if ae.retryAfter > 0 {
		return ae.retryAfter
	}
	if ae.class == ClassRateLimit {
		return Backoff(attempt, r.RateBaseDelay, r.RateMaxDelay)
	}
	return Backoff(attempt, r.BaseDelay, r.MaxDelay)
}

// sleep waits d or until ctx ends, reporting whether the wait completed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
