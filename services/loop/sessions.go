package loop

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoSession is returned for a session id nobody has used.
var ErrNoSession = errors.New("no such session")

// LoadSession returns a session's state record.
func LoadSession(ctx context.Context, js jetstream.JetStream, sid string) (*State, error) {
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		return nil, err
	}
	st, err := sessionStore{kv: kv}.load(ctx, sid)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoSession, sid)
	}
	return st, nil
}

// ListSessions returns every session's state, most recently started first.
func ListSessions(ctx context.Context, js jetstream.JetStream) ([]*State, error) {
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		return nil, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	store := sessionStore{kv: kv}
	var out []*State
	for _, k := range keys {
		st, err := store.load(ctx, k)
		if err != nil || st == nil {
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TurnStartedMs > out[j].TurnStartedMs })
	return out, nil
}

// SessionTranscript returns a session's committed transcript entries.
func SessionTranscript(ctx context.Context, js jetstream.JetStream, sid string) (*State, []*heraldpb.TranscriptEntry, error) {
	st, err := LoadSession(ctx, js, sid)
	if err != nil {
		return nil, nil, err
	}
	entries, err := ReadEntries(ctx, js, st.logID(), st.TranscriptLen, st.LogChain)
	return st, entries, err
}

// titleRunes bounds a session's title.
const titleRunes = 60

// sessionTitle is a prompt as one short line.
func sessionTitle(prompt string) string {
	t := strings.Join(strings.Fields(prompt), " ")
	if r := []rune(t); len(r) > titleRunes {
		t = string(r[:titleRunes-1]) + "…"
	}
	return t
}

// Outcome is how a session stands for a person: its status while a turn
// runs, else how its last turn ended ("idle" only before any turn ended).
func (st *State) Outcome() string {
	switch {
	case st.Status != statusIdle && st.Status != "":
		return st.Status
	case st.LastExit == "":
		return statusIdle
	case st.LastExit == proto.ExitTextResponse:
		return "done"
	case st.LastExit == proto.ExitInterrupted:
		return "interrupted"
	}
	return "failed"
}
