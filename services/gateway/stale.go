package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// A request is redelivered when the gateway that took it stopped before
// acking it. If that gateway had already answered, the session may have
// moved on (later steps answered, or its turn over) by the time the request
// comes round again; sending it to the model then is paid for and thrown
// away. Only a request whose session still waits for it, or has not yet
// committed the transition that sent it, is worth sending.

// sessionView is the part of the loop's session record (KV herald_sessions,
// written by services/loop/state.go) that says where a session is.
type sessionView struct {
	Turn             int          `json:"turn"`
	Step             int          `json:"step"`
	Attempt          int          `json:"attempt"`
	CompressAttempts int          `json:"compress_attempts"`
	Pending          *pendingView `json:"pending"`
}

type pendingView struct {
	Kind      string `json:"kind"`
	RequestID string `json:"request_id"`
}

// The loop's pending kinds the check reads.
const (
	pendingLLM      = "llm"
	pendingCompress = "compress"
)

// staleRequests reads session records for the check.
type staleRequests struct {
	records *bus.LazyBucket
}

// stale reports whether the request's session has moved past it. A session
// with no record yet (its first transition is still committing) has not.
func (r *staleRequests) stale(ctx context.Context, req *heraldpb.LLMRequest) (bool, error) {
	kv, err := r.records.Open(ctx)
	if err != nil {
		return false, fmt.Errorf("open session records: %w", err)
	}
	e, err := kv.Get(ctx, req.GetSessionId())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read session %s: %w", req.GetSessionId(), err)
	}
	var v sessionView
	if json.Unmarshal(e.Value(), &v) != nil {
		return false, nil
	}
	return v.movedPast(req.GetRequestId()), nil
}

// movedPast reports whether the session no longer waits for the request
// and has committed a position at or beyond it. Effects are published
// before the state that expects them commits, so a request ahead of the
// record is a new one, not a stale one.
func (v sessionView) movedPast(requestID string) bool {
	if compressID, ok := strings.CutSuffix(requestID, summarySuffix); ok {
		return v.movedPastCompression(compressID)
	}
	p, ok := parseRequestPosition(requestID)
	if !ok {
		return false
	}
	if v.Pending != nil && v.Pending.Kind == pendingLLM && v.Pending.RequestID == requestID {
		return false
	}
	return !p.after(position{v.Turn, v.Step, v.Attempt})
}

// summarySuffix ends the id of a compressor's summary call: the id of the
// loop's compression request ("<sid>:c<n>") plus this.
const summarySuffix = ":summary"

func (v sessionView) movedPastCompression(compressID string) bool {
	i := strings.LastIndex(compressID, ":c")
	if i < 0 {
		return false
	}
	n, err := strconv.Atoi(compressID[i+2:])
	if err != nil {
		return false
	}
	if v.Pending != nil && v.Pending.Kind == pendingCompress && v.Pending.RequestID == compressID {
		return false
	}
	return n <= v.CompressAttempts
}

// position orders a session's model calls, as the loop numbers them.
type position struct{ turn, step, attempt int }

func (p position) after(q position) bool {
	if p.turn != q.turn {
		return p.turn > q.turn
	}
	if p.step != q.step {
		return p.step > q.step
	}
	return p.attempt > q.attempt
}

// parseRequestPosition reads a loop request id "<sid>:<turn>:<step>:<attempt>".
func parseRequestPosition(id string) (position, bool) {
	parts := strings.Split(id, ":")
	if len(parts) < 4 {
		return position{}, false
	}
	var nums [3]int
	for i, s := range parts[len(parts)-3:] {
		n, err := strconv.Atoi(s)
		if err != nil {
			return position{}, false
		}
		nums[i] = n
	}
	return position{nums[0], nums[1], nums[2]}, true
}

// dropIfStale is the handler's check on a redelivered request: a request
// its session has moved past is acked without a model call and counted.
// When the record cannot be read (say, a NATS user not yet allowed to read
// herald_sessions) the request is sent: paying for a call twice is better
// than a session that never gets its answer.
func (s *Service) dropIfStale(ctx context.Context, req *heraldpb.LLMRequest) bool {
	stale, err := s.staleReqs.stale(ctx, req)
	if err != nil {
		s.log.Warn().Err(err).Str("session_id", req.GetSessionId()).Str("request_id", req.GetRequestId()).
			Msg("session state unreadable; sending the redelivered LLM request unchecked")
		return false
	}
	if !stale {
		return false
	}
	s.counters.stale.Add(1)
	s.log.Info().Str("session_id", req.GetSessionId()).Str("request_id", req.GetRequestId()).
		Msg("redelivered LLM request dropped: its session has moved past it")
	return true
}
