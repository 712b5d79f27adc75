package gateway

import (
	"sync"
)

// A transcript message is encoded for a provider once (issue 14): the
// gateway's history (history.go) keeps, beside each message it rebuilt, a
// wireSlot holding that message's request JSON as each encoder produced it,
// and later steps of the session splice those bytes into their bodies
// instead of encoding the whole history again. A slot belongs to one
// position of one session log with the chain through it, so it describes
// exactly one message; a history read again from the log gets new slots.

// wireSlot holds one history message's encodings, one per encoder (an
// encoder is one API mode with one endpoint's profile, which is all that
// shapes a message's bytes besides the message itself).
type wireSlot struct {
	mu  sync.Mutex
	enc map[requestEncoder][]byte
}

func (s *wireSlot) get(e requestEncoder) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.enc[e]
	return b, ok
}

func (s *wireSlot) put(e requestEncoder, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enc == nil {
		s.enc = map[requestEncoder][]byte{}
	}
	s.enc[e] = b
}

// newWireSlots is n empty slots.
func newWireSlots(n int) []*wireSlot {
	out := make([]*wireSlot, n)
	for i := range out {
		out[i] = &wireSlot{}
	}
	return out
}
