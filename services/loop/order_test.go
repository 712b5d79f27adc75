package loop

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEarlyOrStale(t *testing.T) {
	waitingLLM := &State{SessionID: "s", Turn: 2, Step: 3, Attempt: 1, Pending: &Pending{Kind: waitLLM}}
	waitingTools := &State{SessionID: "s", Turn: 2, Step: 3, Pending: &Pending{Kind: waitTools}}
	cases := []struct {
		name  string
		err   error
		early bool
	}{
		{"response of a session not yet created", classifyResponse(nil, "s:1:1:0"), true},
		{"response of the next step", classifyResponse(waitingLLM, "s:2:4:0"), true},
		{"response of the next attempt", classifyResponse(waitingLLM, "s:2:3:2"), true},
		{"response of the next turn", classifyResponse(waitingLLM, "s:3:1:0"), true},
		{"response of an earlier attempt", classifyResponse(waitingLLM, "s:2:3:0"), false},
		{"response of an earlier turn", classifyResponse(waitingLLM, "s:1:9:0"), false},
		{"unparseable request id", classifyResponse(waitingLLM, "nonsense"), false},
		{"result of calls still being decided", classifyResult(waitingLLM, "t2s3c0"), true},
		{"result of a later step", classifyResult(waitingTools, "t2s4c1"), true},
		{"result of an earlier step", classifyResult(waitingTools, "t2s2c0"), false},
		{"result of an earlier turn", classifyResult(waitingLLM, "t1s9c0"), false},
		{"compression not yet asked for", classifyCompress(&State{CompressAttempts: 1}, "s:c2"), true},
		{"compression already handled", classifyCompress(&State{CompressAttempts: 2}, "s:c1"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.early {
				require.ErrorIs(t, tc.err, errEarly)
				return
			}
			require.NoError(t, tc.err)
		})
	}
}

func TestIterationBudget(t *testing.T) {
	st := &State{MaxIterations: 3}
	step := func(tools ...string) {
		st.Step++
		st.Pending = &Pending{Kind: waitTools}
		for _, tool := range tools {
			st.Pending.Calls = append(st.Pending.Calls, PendingCall{Tool: tool})
		}
		st.refundCheapStep()
	}
	step("todo")
	step("todo", "todo")
	step("read_file")
	step("todo", "read_file")
	require.False(t, st.budgetSpent(), "two cheap-only steps were refunded")
	step("terminal")
	require.True(t, st.budgetSpent())

	capped := &State{MaxIterations: 2}
	for range 3 {
		capped.Step++
		capped.Pending = &Pending{Calls: []PendingCall{{Tool: "todo"}}}
		capped.refundCheapStep()
		require.False(t, capped.budgetSpent())
	}
	capped.Step++
	require.True(t, capped.budgetSpent(), "the hard cap holds whatever the refunds")
}

// An input that came early waits for its session's next commit in this
// process, not for a fixed time: the commit closes what next returned, and
// only for that session.
func TestEarlyInputsWakeAtTheirSessionsCommit(t *testing.T) {
	var c commitSignals
	c.done("s1") // nobody waits: nothing happens
	a, b := c.next("s1"), c.next("s2")
	require.Equal(t, a, c.next("s1"), "waiters of one session share the signal")
	c.done("s1")
	select {
	case <-a:
	default:
		t.Fatal("the commit of s1 did not wake its waiter")
	}
	select {
	case <-b:
		t.Fatal("the commit of s1 woke a waiter of s2")
	default:
	}
	select {
	case <-c.next("s1"):
		t.Fatal("a new wait must wait for the next commit")
	default:
	}
}
