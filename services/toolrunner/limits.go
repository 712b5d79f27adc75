package toolrunner

import "context"

// toolLimits caps how many calls of one tool run at once in this process
// (say, one browser or one heavy build at a time) on top of the runner's
// overall concurrency.
type toolLimits struct {
	slots map[string]chan struct{}
}

func newToolLimits(limits map[string]int) *toolLimits {
	l := &toolLimits{slots: map[string]chan struct{}{}}
	for tool, n := range limits {
		l.slots[tool] = make(chan struct{}, n)
	}
	return l
}

// acquire waits for a slot of tool; release gives it back.
func (l *toolLimits) acquire(ctx context.Context, tool string) (release func(), err error) {
	slot, limited := l.slots[tool]
	if !limited {
		return func() {}, nil
	}
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// tryAcquire takes a slot of tool only if one is free now.
func (l *toolLimits) tryAcquire(tool string) (release func(), ok bool) {
	slot, limited := l.slots[tool]
	if !limited {
		return func() {}, true
	}
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, true
	default:
		return nil, false
	}
}
