package toolrunner

import (
	"context"
	"errors"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// BucketState is the runner's own KV bucket, shared by every runner process:
// started markers of non-idempotent calls, circuit-breaker counters and todo
// lists, keyed by session. pkg/bus declares it with everything else.
const BucketState = bus.BucketToolRunner

func startedKey(sid, callID string) string {
	return "started." + bus.Token(sid) + "." + bus.Token(callID)
}
func breakerKey(sid, tool string) string { return "breaker." + bus.Token(sid) + "." + bus.Token(tool) }
func todoKey(sid string) string          { return "todo." + bus.Token(sid) }

// markStarted records, before a non-idempotent call runs, that it may have
// had effects; a runner that gets the call again after a crash reads it.
func (s *Service) markStarted(ctx context.Context, c *call) error {
	_, err := s.state.Put(ctx, startedKey(c.req.GetSessionId(), c.req.GetCallId()), []byte(s.runner))
	return err
}

// startedBy returns the runner that began the call, or "" if none did.
func (s *Service) startedBy(ctx context.Context, sid, callID string) (string, error) {
	e, err := s.state.Get(ctx, startedKey(sid, callID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}
