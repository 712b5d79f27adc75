package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// gates hold every call to a provider until the provider may take it: this
// process's adaptive cap (adaptive.go) and, when herald.yaml sets
// providers.<name>.max_concurrent, rpm or tpm, the limits every gateway
// shares (limits.go). A call beyond a limit waits; it does not fail.
type gates struct {
	js       jetstream.JetStream
	profiles map[string]config.ProviderProfile
	ceiling  int
	log      zerolog.Logger

	mu         sync.Mutex
	byProvider map[string]*gate
	// nc and id announce this gateway's pauses (pauses.go).
	nc *nats.Conn
	id string
	// warned spaces the warnings about an unreachable shared state.
	warned time.Time
}

// gate is one provider's.
type gate struct {
	adaptive *adaptive
	shared   *sharedLimits // nil: no shared limit configured
}

// pass is a call let through a gate; leave it when the provider answered.
type pass struct {
	g       *gates
	gate    *gate
	started time.Time
	shared  bool
	cost    int64
}

func newGates(js jetstream.JetStream, profiles map[string]config.ProviderProfile, ceiling int, log zerolog.Logger) *gates {
	return &gates{js: js, profiles: profiles, ceiling: ceiling, log: log, byProvider: map[string]*gate{}}
}

func (g *gates) of(provider string) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gt, ok := g.byProvider[provider]; ok {
		return gt
	}
	prof := g.profiles[provider]
	ceiling := g.ceiling
	if prof.MaxConcurrent > 0 {
		ceiling = min(ceiling, prof.MaxConcurrent)
	}
	gt := &gate{adaptive: newAdaptive(ceiling)}
	gt.adaptive.fixed = prof.MaxConcurrent > 0
	if prof.Limited() {
		gt.shared = newSharedLimits(g.js, provider, prof)
	}
	g.byProvider[provider] = gt
	return gt
}

// enter waits until the provider may take a call of about cost tokens. Its
// only error is ctx's: a shared state that cannot be read is logged and
// the call goes on under this process's own cap. waiting (if not nil) is
// told what the call waits for (a proto.Limit* and a message for the
// session) each time that changes.
func (g *gates) enter(ctx context.Context, provider string, cost int64, waiting func(limit, message string)) (*pass, error) {
	gt := g.of(provider)
	prof := g.profiles[provider]
	told := ""
	tell := func(limit, message string) {
		if waiting != nil && limit != told {
			told = limit
			waiting(limit, message)
		}
	}
	started, err := gt.adaptive.acquire(ctx, func(paused bool, limit int) {
		switch {
		case paused:
			tell(proto.LimitPause, fmt.Sprintf("provider %s asked for a pause (429 with Retry-After); this call goes when it ends", provider))
		case gt.adaptive.fixed:
			tell(proto.LimitProviderCalls, fmt.Sprintf("provider %s has %d calls in flight from this gateway, its max_concurrent; this call goes when one ends", provider, limit))
		default:
			tell(proto.LimitGatewayCap, fmt.Sprintf("this gateway has %d calls to provider %s in flight, its cap (lowered by the provider's 429s); this call goes when one ends", limit, provider))
		}
	})
	if err != nil {
		return nil, err
	}
	p := &pass{g: g, gate: gt, started: started, cost: cost}
	if gt.shared == nil {
		return p, nil
	}
	err = gt.shared.acquire(ctx, cost, func(limit string, d time.Duration) {
		switch limit {
		case proto.LimitPause:
			tell(limit, fmt.Sprintf("provider %s asked for a pause (429 with Retry-After); this call goes in %s", provider, d.Round(time.Millisecond)))
		case proto.LimitProviderRPM:
			tell(limit, fmt.Sprintf("provider %s is at its rpm %d across every gateway; this call goes in %s", provider, prof.RPM, d.Round(time.Millisecond)))
		case proto.LimitProviderTPM:
			tell(limit, fmt.Sprintf("provider %s is at its tpm %d across every gateway; this call goes in %s", provider, prof.TPM, d.Round(time.Millisecond)))
		default:
			tell(limit, fmt.Sprintf("provider %s has its max_concurrent %d calls in flight across every gateway (fewer while its 429s hold it down); this call goes when one ends", provider, prof.MaxConcurrent))
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			gt.adaptive.done(started, false, false, 0)
			return nil, ctx.Err()
		}
		g.warn(err, provider)
		return p, nil
	}
	p.shared = true
	return p, nil
}

// leave records how the provider answered: ae nil for an answer, used the
// tokens the call really took.
func (p *pass) leave(ctx context.Context, provider string, ae *attemptError, used *heraldpb.Usage) {
	limited := ae != nil && ae.class == ClassRateLimit
	var retryAfter time.Duration
	if limited {
		retryAfter = ae.retryAfter
	}
	p.gate.adaptive.done(p.started, ae == nil, limited, retryAfter)
	if retryAfter > 0 {
		p.g.announcePause(provider, retryAfter)
	}
	if !p.shared {
		return
	}
	extra := tokensOf(used) - p.cost
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if err := p.gate.shared.release(rctx, p.started, ae == nil, limited, retryAfter, extra); err != nil {
		p.g.warn(err, provider)
	}
}

// renew keeps this process's holds alive until ctx ends.
func (g *gates) renew(ctx context.Context) {
	t := time.NewTicker(holderTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		var shared []*sharedLimits
		for _, gt := range g.byProvider {
			if gt.shared != nil {
				shared = append(shared, gt.shared)
			}
		}
		g.mu.Unlock()
		for _, l := range shared {
			rctx, cancel := context.WithTimeout(ctx, publishTimeout)
			if err := l.renew(rctx); err != nil && ctx.Err() == nil {
				g.warn(err, l.key)
			}
			cancel()
		}
	}
}

func (g *gates) warn(err error, provider string) {
	g.mu.Lock()
	now := time.Now()
	quiet := now.Sub(g.warned) < time.Minute
	if !quiet {
		g.warned = now
	}
	g.mu.Unlock()
	if !quiet {
		g.log.Warn().Err(err).Str("provider", provider).
			Msg("the provider's shared limits could not be read or written; calls go on under this gateway's own cap (run herald declare?)")
	}
}

// estimateTokens is a request's prompt tokens before the provider counts
// them: about four characters a token.
func estimateTokens(req *heraldpb.LLMRequest) int64 {
	var chars int
	for _, m := range req.GetMessages() {
		chars += len(m.GetContent()) + len(m.GetReasoning())
		for _, tc := range m.GetToolCalls() {
			chars += len(tc.GetArguments())
		}
	}
	return int64(chars/4) + 1
}

func tokensOf(u *heraldpb.Usage) int64 {
	return u.GetInputTokens() + u.GetCacheReadTokens() + u.GetCacheWriteTokens() + u.GetOutputTokens()
}
