package toolrunner

import (
	"context"

	"github.com/heraldrun/herald/pkg/toolspec"
)

// mcpHub holds the MCP servers' tools.
type mcpHub struct{}

func (s *Service) startMCP(ctx context.Context) error { return nil }
func (s *Service) stopMCP()                           {}

func (h *mcpHub) lookup(name string) (tool, toolspec.Spec, bool) { return nil, toolspec.Spec{}, false }
func (h *mcpHub) specs() []toolspec.Spec                         { return nil }
