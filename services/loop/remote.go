package loop

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// remoteTools are the tools tool runners announce beyond the built-in ones
// (their MCP servers' tools), learnt by a core request on
// herald.tools.specs. They are cached and refreshed in the background, so
// the per-step path never waits on the request.
type remoteTools struct {
	nc      *nats.Conn
	log     zerolog.Logger
	timeout time.Duration
	ttl     time.Duration

	mu         sync.Mutex
	specs      []toolspec.Spec
	gen        uint64 // counts the lists specs has held
	fetched    time.Time
	refreshing bool
}

// announcedSpec is one entry of a runner's answer.
type announcedSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	ReadOnly    bool           `json:"read_only"`
	Idempotent  bool           `json:"idempotent"`
}

// refresh asks the runners for their tools; no answer keeps what is known.
func (r *remoteTools) refresh() {
	msg, err := r.nc.Request(bus.ToolSpecsSubject, nil, r.timeout)
	var specs []toolspec.Spec
	if err == nil {
		var announced []announcedSpec
		if err = json.Unmarshal(msg.Data, &announced); err == nil {
			for _, a := range announced {
				if _, builtin := toolspec.Lookup(a.Name); builtin || a.Name == "" {
					continue
				}
				specs = append(specs, toolspec.Spec{Name: a.Name, Description: a.Description, Parameters: a.Parameters,
					ReadOnly: a.ReadOnly, Idempotent: a.Idempotent, Service: "toolrunner"})
			}
			sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshing = false
	r.fetched = time.Now()
	if err != nil {
		r.log.Debug().Err(err).Msg("no tool runner announced its tools; keeping the known ones")
		return
	}
	r.specs = specs
	r.gen++
}

// get returns the known remote tools, starting a refresh when they are old.
func (r *remoteTools) get() []toolspec.Spec {
	specs, _ := r.current()
	return specs
}

// current is get with the generation of the list it returns.
func (r *remoteTools) current() ([]toolspec.Spec, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.fetched) > r.ttl && !r.refreshing {
		r.refreshing = true
		go r.refresh()
	}
	return r.specs, r.gen
}
