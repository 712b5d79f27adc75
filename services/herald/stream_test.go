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
