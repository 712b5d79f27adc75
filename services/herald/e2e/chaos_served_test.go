package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

// chaosPrompt names session i in its prompt, so the model server can tell
// whose call it serves.
func chaosPrompt(i int) string { return fmt.Sprintf("chaos task #%d.", i) }

var chaosPromptIndex = regexp.MustCompile(`^chaos task #(\d+)\.$`)

// modelCall is one call a session needs: its index and step (the number of
// assistant messages before it, 0-based).
type modelCall struct{ session, step int }

// servedCalls is when the model server received each call.
type servedCalls struct {
	mu sync.Mutex
	at map[modelCall][]time.Time
}

func (s *servedCalls) note(r *scripted.Request) {
	if s == nil {
		return
	}
	now := time.Now()
	m := chaosPromptIndex.FindStringSubmatch(r.FirstUser())
	if m == nil {
		return
	}
	i, _ := strconv.Atoi(m[1])
	s.mu.Lock()
	defer s.mu.Unlock()
	k := modelCall{i, r.AssistantCount()}
	s.at[k] = append(s.at[k], now)
}

// surplusCalls sorts the calls served beyond what the sessions needed: a
// stale re-send reached the model after the call's answer was already
// stored (so the session had what it needed, or had moved on, and the call
// was paid for twice); an in-flight re-send reached it before any answer
// was stored (its gateway died mid-call, and sending it again was right).
type surplusCalls struct{ served, needed, stale, inFlight int }

func (s *servedCalls) surplus(t *testing.T, c *cluster, tasks []proto.Task) surplusCalls {
	t.Helper()
	answered := answeredAt(t, c)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out surplusCalls
	for k, times := range s.at {
		out.served += len(times)
		out.needed++
		first, ok := answered[answerKey{tasks[k.session].SessionID, k.step}]
		require.True(t, ok, "no stored answer for step %d of %s", k.step, tasks[k.session].SessionID)
		for i, at := range times {
			switch {
			case at.After(first):
				out.stale++
				t.Logf("stale re-send: step %d of %s served %s after its answer was stored", k.step,
					tasks[k.session].SessionID, at.Sub(first).Round(time.Millisecond))
			case i > 0:
				out.inFlight++
			}
		}
	}
	return out
}

// answerKey is a session and step (0-based, as modelCall counts them).
type answerKey struct {
	session string
	step    int
}

// answeredAt is when the first successful answer of each session's step was
// stored, read from LLM_RESPONSES (request ids "<sid>:<turn>:<step>:<attempt>",
// steps counted from 1).
func answeredAt(t *testing.T, c *cluster) map[answerKey]time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.JS.Stream(ctx, bus.StreamLLMResponses)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	cons, err := c.JS.OrderedConsumer(ctx, bus.StreamLLMResponses, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	out := map[answerKey]time.Time{}
	for range info.State.Msgs {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		resp := &heraldpb.LLMResponse{}
		require.NoError(t, gproto.Unmarshal(m.Data(), resp))
		parts := strings.Split(resp.GetRequestId(), ":")
		if resp.GetError() != "" || len(parts) < 4 {
			continue
		}
		step, err := strconv.Atoi(parts[len(parts)-2])
		require.NoError(t, err, resp.GetRequestId())
		meta, err := m.Metadata()
		require.NoError(t, err)
		k := answerKey{strings.Join(parts[:len(parts)-3], ":"), step - 1}
		if first, ok := out[k]; !ok || meta.Timestamp.Before(first) {
			out[k] = meta.Timestamp
		}
	}
	return out
}
