package toolrunner

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/nats-io/nats.go"
)

// SpecsQueue is the queue group runners answer bus.ToolSpecsSubject in, so
// one request gets one reply however many runners run.
const SpecsQueue = "toolrunner"

// ToolSpecJSON is one entry of the reply on bus.ToolSpecsSubject.
type ToolSpecJSON struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	ReadOnly    bool           `json:"read_only,omitempty"`
	Idempotent  bool           `json:"idempotent,omitempty"`
}

// lookup finds a tool and its schema: a built-in or an MCP server's tool.
func (s *Service) lookup(name string) (tool, toolspec.Spec, bool) {
	if t, ok := s.tools[name]; ok {
		spec, found := toolspec.Lookup(name)
		return t, spec, found
	}
	return s.mcp.lookup(name)
}

// specs lists every tool this runner executes, sorted by name.
func (s *Service) specs() []toolspec.Spec {
	var out []toolspec.Spec
	for name := range s.tools {
		if spec, ok := toolspec.Lookup(name); ok {
			out = append(out, spec)
		}
	}
	out = append(out, s.mcp.specs()...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Service) toolNames() string {
	var names []string
	for _, spec := range s.specs() {
		names = append(names, spec.Name)
	}
	return strings.Join(names, ", ")
}

// Specs returns the schemas of every tool this runner offers (built-in and
// MCP), as the loop should send them to the model.
func (s *Service) Specs() []ToolSpecJSON {
	var out []ToolSpecJSON
	for _, spec := range s.specs() {
		out = append(out, ToolSpecJSON{Name: spec.Name, Description: spec.Description,
			Parameters: spec.Parameters, ReadOnly: spec.ReadOnly, Idempotent: spec.Idempotent})
	}
	return out
}

// serveSpecs answers core requests on bus.ToolSpecsSubject with Specs as JSON.
func (s *Service) serveSpecs() (*nats.Subscription, error) {
	sub, err := s.deps.NC.QueueSubscribe(bus.ToolSpecsSubject, SpecsQueue, func(m *nats.Msg) {
		data, _ := json.Marshal(s.Specs())
		if err := m.Respond(data); err != nil {
			s.log.Warn().Err(err).Msg("answering a tool specs request failed")
		}
	})
	if err != nil {
		return nil, fmt.Errorf("toolrunner: serve tool specs: %w", err)
	}
	return sub, nil
}

// RunnerPong is a tool runner's answer on bus.RunnersPing.
type RunnerPong struct {
	Pool        string `json:"pool"`
	Concurrency int    `json:"concurrency"`
}

// servePing answers bus.RunnersPing, every runner on its own.
func (s *Service) servePing() (*nats.Subscription, error) {
	pong, _ := json.Marshal(RunnerPong{Pool: s.cfg.Pool, Concurrency: s.cfg.Concurrency})
	sub, err := s.deps.NC.Subscribe(bus.RunnersPing, func(m *nats.Msg) { _ = m.Respond(pong) })
	if err != nil {
		return nil, fmt.Errorf("toolrunner: answer runner pings: %w", err)
	}
	return sub, nil
}
