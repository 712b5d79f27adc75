package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go"
)

// SnapshotRequest asks for a tenant's memory (JSON on bus.MemorySnapshotSubject).
type SnapshotRequest struct {
	Tenant string `json:"tenant"`
}

// Snapshot is the reply: each store's entries joined by EntrySeparator
// (empty when the store has none), or Error when the request was unusable.
type Snapshot struct {
	Memory string `json:"memory"`
	User   string `json:"user"`
	Error  string `json:"error,omitempty"`
}

// snapshotStream names the dead-letter subject of malformed snapshot requests.
const snapshotStream = "MEMORY_SNAPSHOT"

// queueGroup shares core requests between memory instances.
const queueGroup = "memory"

// snapshotTimeout bounds the KV reads behind one reply.
const snapshotTimeout = 5 * time.Second

func (s *Service) serveSnapshot(m *nats.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	var req SnapshotRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		reason := fmt.Sprintf("malformed snapshot request: want {\"tenant\":\"...\"}: %v", err)
		if dlErr := bus.DeadLetterRaw(ctx, s.deps.JS, snapshotStream, m.Subject, m.Data, reason); dlErr != nil {
			s.log.Warn().Err(dlErr).Msg("dead-lettering snapshot request failed")
		}
		s.reply(m, Snapshot{Error: reason})
		return
	}
	snap, err := s.Snapshot(ctx, s.tenant(req.Tenant))
	if err != nil {
		s.log.Warn().Err(err).Str("tenant", req.Tenant).Msg("memory snapshot failed")
		snap = Snapshot{Error: err.Error()}
	}
	s.reply(m, snap)
}

// Snapshot returns the tenant's two stores as they go into a system prompt.
func (s *Service) Snapshot(ctx context.Context, tenant string) (Snapshot, error) {
	mem, err := s.store.Entries(ctx, tenant, TargetMemory)
	if err != nil {
		return Snapshot{}, err
	}
	user, err := s.store.Entries(ctx, tenant, TargetUser)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Memory: strings.Join(mem, EntrySeparator), User: strings.Join(user, EntrySeparator)}, nil
}

func (s *Service) reply(m *nats.Msg, v any) {
	data, _ := json.Marshal(v)
	if err := m.Respond(data); err != nil {
		s.log.Debug().Err(err).Msg("snapshot reply not sent")
	}
}
