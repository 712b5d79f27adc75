package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
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
	n   int // bytes in enc
}

func (s *wireSlot) bytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
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
	s.n += len(b) - len(s.enc[e])
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

// splice replaces the one sentinel element in frame (an array holding only
// it) by parts joined with commas; an empty part adds nothing. It is false
// when the sentinel is not in frame exactly once.
func splice(frame, sentinel []byte, parts [][]byte) ([]byte, bool) {
	b, ok := spliceBody(frame, sentinel, parts)
	if !ok {
		return nil, false
	}
	return b.Bytes(), true
}

// spliceBody is splice for a request body: the parts are not joined but
// kept, with the commas and the frame's ends, as the body's parts (a body
// always has the frame's two ends, so Bytes joins them into a new slice).
func spliceBody(frame, sentinel []byte, parts [][]byte) (*requestBody, bool) {
	at := bytes.Index(frame, sentinel)
	if at < 0 || bytes.Contains(frame[at+len(sentinel):], sentinel) {
		return nil, false
	}
	b := &requestBody{parts: make([][]byte, 0, 2*len(parts)+1)}
	b.parts = append(b.parts, frame[:at])
	first := true
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if !first {
			b.parts = append(b.parts, comma)
		}
		b.parts, first = append(b.parts, p), false
	}
	b.parts = append(b.parts, frame[at+len(sentinel):])
	for _, p := range b.parts {
		b.size += len(p)
	}
	return b, true
}

var comma = []byte{','}

// spliceSentinel is the text of the element a body is first encoded with in
// place of its history; it is random so no request holds it by chance (and
// splice checks that none does).
var spliceSentinel = "herald-splice-" + rand.Text()

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
