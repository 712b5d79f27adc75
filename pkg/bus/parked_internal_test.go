package bus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func seqs(jobs []job) []uint64 {
	var out []uint64
	for _, j := range jobs {
		out = append(out, j.seq)
	}
	return out
}

// The window keeps the oldest waiting messages of a scope, and in all, and
// hands back the newest beyond its bounds, whatever order they waited in:
// the oldest go next.
func TestTheWindowKeepsTheOldestWaitingAndHandsBackTheNewest(t *testing.T) {
	q := newFairQueue(nil)
	q.maxParked, q.maxPerScope = 5, 3
	var back []job
	for _, seq := range []uint64{4, 1, 6, 2, 5, 3} {
		back = append(back, q.park(job{seq: seq}, "acme", int(seq))...)
	}
	require.Equal(t, []uint64{1, 2, 3}, seqs(q.parked["acme"]))
	require.ElementsMatch(t, []uint64{4, 5, 6}, seqs(back))

	back = nil
	for _, seq := range []uint64{10, 11, 12} {
		back = append(back, q.park(job{seq: seq}, "globex", 1)...)
	}
	// five in all: the scope holding most gives way first
	require.Equal(t, 5, q.parkedCount())
	require.Len(t, back, 1)
	require.Equal(t, uint64(3), back[0].seq, "acme held most: its newest went back")
	require.Equal(t, []uint64{1, 2}, seqs(q.parked["acme"]))
	require.Equal(t, []uint64{10, 11, 12}, seqs(q.parked["globex"]))
}

// A handed-back message stays away about half the time the waiters ahead
// of it take at its scope's pace, within bounds; without a pace it backs
// off, further back the longer.
func TestAHandedBackMessageComesBackAboutWhenItsTurnNears(t *testing.T) {
	q := newFairQueue(nil)
	q.maxPerScope = 4
	for seq := range uint64(4) {
		q.keep(job{seq: seq, scope: "acme"})
	}
	near, mid, far := job{scope: "acme", position: 6}, job{scope: "acme", position: 24}, job{scope: "acme", position: 84}
	require.Equal(t, minReturn, q.returnDelay(near, 1))
	require.Equal(t, 5*minReturn, q.returnDelay(mid, 1), "20 ahead beyond the 4 kept: five bounds' worth")
	require.Equal(t, 10*minReturn, q.returnDelay(mid, 2), "twice as long the second time")
	require.Equal(t, maxReturn/4, q.returnDelay(far, 1), "at most 2.5 s without a pace")

	now := time.Now()
	for i := range 10 {
		q.paced("acme", now.Add(time.Duration(i)*100*time.Millisecond))
	}
	require.Equal(t, 4*time.Second, q.returnDelay(far, 1), "80 ahead at one every 100 ms: 8 s, half of it")
	require.Equal(t, minReturn, q.returnDelay(near, 1))
	require.Equal(t, maxReturn, q.returnDelay(job{scope: "acme", position: 10_000}, 1))
}
