package memory

import (
	"container/heap"
	"sync"
)

// scoreScratch holds per-document accumulators for one search; reused so a
// search over hundreds of thousands of messages allocates almost nothing.
type scoreScratch struct {
	score   []float32
	matched []uint8
	touched []uint32
}

type scratchPoolT struct{ p sync.Pool }

var scratchPool scratchPoolT

func (sp *scratchPoolT) get(n int) *scoreScratch {
	s, _ := sp.p.Get().(*scoreScratch)
	if s == nil {
		s = &scoreScratch{}
	}
	if cap(s.score) < n {
		s.score, s.matched = make([]float32, n), make([]uint8, n)
	}
	s.score, s.matched = s.score[:n], s.matched[:n]
	return s
}

// put clears only what the search touched, then returns s to the pool.
func (sp *scratchPoolT) put(s *scoreScratch) {
	for _, d := range s.touched {
		s.score[d], s.matched[d] = 0, 0
	}
	s.touched = s.touched[:0]
	sp.p.Put(s)
}

// candidateHeap keeps the best `candidates` scores (a min-heap on score).
type candidateHeap struct{ items []candidate }

func (h *candidateHeap) offer(c candidate) {
	if len(h.items) < candidates {
		heap.Push(h, c)
		return
	}
	if c.score > h.items[0].score {
		h.items[0] = c
		heap.Fix(h, 0)
	}
}

func (h *candidateHeap) Len() int           { return len(h.items) }
func (h *candidateHeap) Less(i, j int) bool { return h.items[i].score < h.items[j].score }
func (h *candidateHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *candidateHeap) Push(x any)         { h.items = append(h.items, x.(candidate)) }
func (h *candidateHeap) Pop() any {
	last := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return last
}
