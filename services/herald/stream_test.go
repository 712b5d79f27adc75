package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// The loop publishes a step's "thinking" state after it sent the model
// request, on another connection than the gateway's deltas: the state may
// arrive after the step's text began. The answer is then printed once.
func TestStreamPrintsAnAnswerOnceWhenItsStepStateArrivesLate(t *testing.T) {
	cases := map[string][]proto.Event{
		"in order": {
			{Type: proto.EventState, State: proto.StateThinking, Step: 1},
			{Type: proto.EventToolStarted, Tool: "write_file", Step: 1},
			{Type: proto.EventState, State: proto.StateThinking, Step: 2},
			{Type: proto.EventDelta, Delta: "the ", Step: 2},
			{Type: proto.EventDelta, Delta: "answer", Step: 2},
		},
		"state after the deltas": {
			{Type: proto.EventState, State: proto.StateThinking, Step: 1},
			{Type: proto.EventToolStarted, Tool: "write_file", Step: 1},
			{Type: proto.EventDelta, Delta: "the ", Step: 2},
			{Type: proto.EventState, State: proto.StateThinking, Step: 2},
			{Type: proto.EventDelta, Delta: "answer", Step: 2},
		},
	}
	for name, events := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			s := &stream{cio: cliIO{out: &out, err: &errOut}}
			for _, ev := range events {
				data, err := json.Marshal(ev)
				require.NoError(t, err)
				s.onEvent(data)
			}
			s.finish(proto.Result{FinalResponse: "the answer"})
			require.Equal(t, "the answer\n", out.String())
		})
	}

	// A text of step 1 followed by step 2's thinking is a finished
	// paragraph: the next step's answer starts on its own line.
	var out, errOut bytes.Buffer
	s := &stream{cio: cliIO{out: &out, err: &errOut}}
	for _, ev := range []proto.Event{
		{Type: proto.EventDelta, Delta: "let me look", Step: 1},
		{Type: proto.EventState, State: proto.StateThinking, Step: 2},
		{Type: proto.EventDelta, Delta: "done", Step: 2},
	} {
		data, _ := json.Marshal(ev)
		s.onEvent(data)
	}
	s.finish(proto.Result{FinalResponse: "done"})
	require.Equal(t, "let me look\ndone\n", out.String())
}

// `herald run` says when the session waits: its turn for a tenant's
// session limit, a model call for a tenant's or a provider's limit.
func TestStreamSaysWhenTheSessionOrAModelCallWaits(t *testing.T) {
	var out, errOut bytes.Buffer
	s := &stream{cio: cliIO{out: &out, err: &errOut}}
	for _, ev := range []proto.Event{
		{Type: proto.EventQueued, Position: 2, Limit: proto.LimitSessions, Message: "tenant acme has 1 sessions going, its limit; this one starts when a slot frees"},
		{Type: proto.EventQueued, Position: 1, Limit: proto.LimitSessions, Message: "tenant acme has 1 sessions going, its limit; this one starts when a slot frees"},
		{Type: proto.EventQueued, Limit: proto.LimitPause, Provider: "openai", Message: "provider openai asked for a pause (429 with Retry-After); this call goes in 2s"},
	} {
		data, err := json.Marshal(ev)
		require.NoError(t, err)
		s.onEvent(data)
	}
	require.Equal(t, "  · queued (position 2): tenant acme has 1 sessions going, its limit; this one starts when a slot frees\n"+
		"  · queued (position 1): tenant acme has 1 sessions going, its limit; this one starts when a slot frees\n"+
		"  · queued: provider openai asked for a pause (429 with Retry-After); this call goes in 2s\n", errOut.String())
	require.Empty(t, out.String(), "the answer's text stays clean")
}
