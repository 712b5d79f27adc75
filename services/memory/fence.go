package memory

import (
	"context"

	"github.com/heraldrun/herald/pkg/hooks"
)

// Fence tags around recalled memory (the same as around plugin context).
// The gateway scrubs these spans from streamed output; the loop adds the
// fenced block to the current user message at call time only and never
// persists it.
const (
	FenceOpen  = hooks.FenceOpen
	FenceClose = hooks.FenceClose
)

// Fence wraps recalled memory so the model reads it as background, not as
// something the user said. Empty recall gives "".
func Fence(recalled string) string { return hooks.FenceAs("Recalled memory", recalled) }

// Provider is an external memory provider (at most one beside the built-in
// stores): it recalls text relevant to a query and may learn from a turn.
type Provider interface {
	Name() string
	Recall(ctx context.Context, tenant, query string) (string, error)
	Observe(ctx context.Context, tenant, userText, assistantText string) error
}
