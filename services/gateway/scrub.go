package gateway

import "strings"

// Memory-context fences: text the memory service injects for the model only.
// A model that echoes it must not leak it into what users see streaming.
const (
	memoryOpen  = "<memory-context>"
	memoryClose = "</memory-context>"
)

// Scrubber removes <memory-context>…</memory-context> spans from a stream
// of text chunks, holding back just enough to recognise a tag split across
// chunks. It is not safe for concurrent use.
type Scrubber struct {
	inside  bool
	pending string
}

// Feed takes the next chunk and returns the text that can be shown now.
func (s *Scrubber) Feed(chunk string) string {
	buf := s.pending + chunk
	s.pending = ""
	var out strings.Builder
	for buf != "" {
		tag := memoryOpen
		if s.inside {
			tag = memoryClose
		}
		if i := strings.Index(buf, tag); i >= 0 {
			if !s.inside {
				out.WriteString(buf[:i])
			}
			buf = buf[i+len(tag):]
			s.inside = !s.inside
			continue
		}
		keep := partialSuffix(buf, tag)
		if !s.inside {
			out.WriteString(buf[:len(buf)-keep])
		}
		s.pending = buf[len(buf)-keep:]
		break
	}
	return out.String()
}

// Flush ends the stream: a held-back fragment that never became a tag is
// text; an unterminated span stays hidden.
func (s *Scrubber) Flush() string {
	rest := s.pending
	s.pending = ""
	if s.inside {
		return ""
	}
	return rest
}

// ScrubMemoryContext removes every memory-context span from a whole text.
func ScrubMemoryContext(text string) string {
	if !strings.Contains(text, "<memory-context") {
		return text
	}
	var s Scrubber
	return s.Feed(text) + s.Flush()
}

// partialSuffix is the length of the longest suffix of buf that is a proper
// prefix of tag (a tag that may complete in the next chunk).
func partialSuffix(buf, tag string) int {
	n := min(len(buf), len(tag)-1)
	for k := n; k > 0; k-- {
		if strings.HasSuffix(buf, tag[:k]) {
			return k
		}
	}
	return 0
}
