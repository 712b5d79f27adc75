package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// catchUpWait bounds how long a search waits for the index to read the
// transcripts stored before the service started.
const catchUpWait = 10 * time.Second

// SearchRequest is the JSON request on SearchSubject.
type SearchRequest struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

// SearchReply is the JSON reply on SearchSubject.
type SearchReply struct {
	Hits  []Hit  `json:"hits"`
	Error string `json:"error,omitempty"`
}

func (s *Service) runSessionSearch(ctx context.Context, req *heraldpb.ToolCallRequest) (searchOutcome, error) {
	a, err := decodeSearchArgs(req.Arguments)
	if err != nil {
		return searchOutcome{Success: false, Error: err.Error(), Results: []Hit{}}, nil
	}
	s.waitIndex(ctx)
	tenant := s.tenant(req.Tenant)
	// Sessions indexed before transcripts named their tenant are shown to
	// unbound callers as before, never to a tenant-bound session.
	bound := bus.WorkspaceTenant(req.Tenant, req.Workspace) != ""
	scope := Scope{Exclude: req.SessionId, Tenant: tenant, Untagged: !bound}
	hits := s.index.SearchIn(scope, a.Query, a.Limit)
	out := searchOutcome{Success: true, Query: a.Query, Results: hits}
	switch {
	case len(hits) == 0 && a.Query == "":
		out.Message = "no past sessions yet"
	case len(hits) == 0:
		out.Message = "no past session mentions that; try other words"
	case a.Query == "":
		out.Message = "no query: the most recent sessions, each with its opening messages"
	}
	if out.Results == nil {
		out.Results = []Hit{}
	}
	return out, nil
}

func (s *Service) waitIndex(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	s.indexer.waitCaughtUp(ctx)
}

func (s *Service) serveSearch(m *nats.Msg) {
	var req SearchRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		s.reply(m, SearchReply{Error: fmt.Sprintf("malformed search request: want {\"query\":\"...\",\"limit\":N}: %v", err)})
		return
	}
	s.waitIndex(context.Background())
	hits := s.index.Search(req.Query, req.Limit, "")
	if hits == nil {
		hits = []Hit{}
	}
	s.reply(m, SearchReply{Hits: hits})
}

// RecallRequest asks for recalled memory for the current turn (JSON on RecallSubject).
type RecallRequest struct {
	Tenant string `json:"tenant"`
	Query  string `json:"query"`
}

// RecallReply carries the fenced recall ("" when there is nothing to add).
type RecallReply struct {
	Context string `json:"context"`
	Error   string `json:"error,omitempty"`
}

func (s *Service) serveRecall(m *nats.Msg) {
	var req RecallRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		s.reply(m, RecallReply{Error: fmt.Sprintf("malformed recall request: want {\"tenant\":\"...\",\"query\":\"...\"}: %v", err)})
		return
	}
	if s.provider == nil {
		s.reply(m, RecallReply{})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	text, err := s.provider.Recall(ctx, s.tenant(req.Tenant), req.Query)
	if err != nil {
		s.log.Warn().Err(err).Str("provider", s.provider.Name()).Msg("memory recall failed")
		s.reply(m, RecallReply{Error: "memory provider " + s.provider.Name() + " failed to recall"})
		return
	}
	s.reply(m, RecallReply{Context: Fence(text)})
}

// Search finds past sessions for people (herald sessions search). It asks a
// running memory service; when none answers, it reads the transcripts from
// the SESSIONS stream itself.
func Search(ctx context.Context, js jetstream.JetStream, query string, limit int) ([]Hit, error) {
	data, _ := json.Marshal(SearchRequest{Query: query, Limit: limit})
	msg, err := js.Conn().RequestWithContext(ctx, SearchSubject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return searchStream(ctx, js, query, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("session search: %w", err)
	}
	var reply SearchReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return nil, fmt.Errorf("session search: bad reply: %w", err)
	}
	if reply.Error != "" {
		return nil, fmt.Errorf("session search: %s", reply.Error)
	}
	return reply.Hits, nil
}

// searchStream builds a throwaway index from the whole SESSIONS stream.
func searchStream(ctx context.Context, js jetstream.JetStream, query string, limit int) ([]Hit, error) {
	cons, err := js.OrderedConsumer(ctx, bus.StreamSessions, jetstream.OrderedConsumerConfig{FilterSubjects: []string{transcriptFilter}})
	if err != nil {
		return nil, fmt.Errorf("session search: %w", err)
	}
	ix := NewIndex()
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("session search: %w", err)
	}
	for pending := info.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("session search: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			pending = meta.NumPending
			var e heraldpb.TranscriptEntry
			if data, err := bus.Payload(ctx, js, m); err == nil && bus.Decode(data, &e) == nil {
				ix.Add(&e, meta.Sequence.Stream)
			}
		}
		if err := batch.Error(); err != nil || n == 0 {
			break
		}
	}
	return ix.Search(query, limit, ""), nil
}
