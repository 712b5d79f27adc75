package gateway

import (
	"sync"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// health remembers, per process, which providers are cooling down after a
// rate limit and which fallback a session's current turn moved to, so the
// primary is restored at the next turn and not hammered while it recovers.
type health struct {
	cooldown time.Duration
	now      func() time.Time

	mu      sync.Mutex
	cooling map[int]time.Time
	sticky  map[string]stickyFallback
}

type stickyFallback struct {
	turn  int32
	index int
	at    time.Time
}

// maxSticky bounds the per-session memory; older entries are dropped.
const maxSticky = 10000

func newHealth(cooldown time.Duration) *health {
	return &health{cooldown: cooldown, now: time.Now, cooling: map[int]time.Time{}, sticky: map[string]stickyFallback{}}
}

// coolDown keeps endpoint index out of chains for the cool-down period.
func (h *health) coolDown(index int) {
	h.mu.Lock()
	h.cooling[index] = h.now().Add(h.cooldown)
	h.mu.Unlock()
}

func (h *health) isCooling(index int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	until, ok := h.cooling[index]
	if ok && h.now().After(until) {
		delete(h.cooling, index)
		return false
	}
	return ok
}

// servedBy records that a fallback served a session's turn.
func (h *health) servedBy(req *heraldpb.LLMRequest, index int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := stickyKey(req)
	if index == 0 {
		delete(h.sticky, key)
		return
	}
	if len(h.sticky) >= maxSticky {
		h.pruneLocked()
	}
	h.sticky[key] = stickyFallback{turn: req.GetTurn(), index: index, at: h.now()}
}

// stickyKey keeps a session's agent calls and its compression calls apart:
// each follows its own chain through the turn.
func stickyKey(req *heraldpb.LLMRequest) string {
	return req.GetSessionId() + "\x00" + req.GetPurpose()
}

func (h *health) pruneLocked() {
	cutoff := h.now().Add(-time.Hour)
	for sid, s := range h.sticky {
		if s.at.Before(cutoff) || len(h.sticky) >= maxSticky {
			delete(h.sticky, sid)
		}
	}
}

// startIndex is where a request's chain begins: the fallback its turn moved
// to, the first fallback when the loop asks for one, else the primary.
func (h *health) startIndex(req *heraldpb.LLMRequest, n int) int {
	start := 0
	h.mu.Lock()
	if s, ok := h.sticky[stickyKey(req)]; ok && s.turn == req.GetTurn() {
		start = s.index
	}
	h.mu.Unlock()
	if req.GetPreferFallback() && start == 0 {
		start = 1
	}
	if start >= n {
		start = n - 1
	}
	return start
}

// chain orders the endpoints a request may be served by: from its start
// index on, skipping endpoints that are cooling down unless none remain.
func (h *health) chain(req *heraldpb.LLMRequest, n int) []int {
	start := h.startIndex(req, n)
	var ready, all []int
	for i := start; i < n; i++ {
		all = append(all, i)
		if !h.isCooling(i) {
			ready = append(ready, i)
		}
	}
	if len(ready) == 0 {
		return all
	}
	return ready
}
