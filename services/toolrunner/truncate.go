package toolrunner

import (
	"fmt"
	"unicode/utf8"
)

// truncateHeadTail keeps the first and last parts of s when it is longer
// than max characters, with a marker saying how much was left out: the start
// of an output says what ran, the end how it finished.
func truncateHeadTail(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	r := []rune(s)
	head := max * 2 / 5
	tail := max - head
	marker := fmt.Sprintf("\n\n[... %d characters truncated: the output had %d; showing the first %d and the last %d ...]\n\n", n-head-tail, n, head, tail)
	return string(r[:head]) + marker + string(r[n-tail:])
}

// headTailBuffer is an io.Writer that keeps at most limit bytes of the start
// and limit bytes of the end of what it is given, so a command printing
// gigabytes cannot exhaust the runner's memory.
type headTailBuffer struct {
	limit int
	head  []byte
	tail  []byte // ring of the last bytes
	pos   int
	full  bool
	total int64
}

func newHeadTailBuffer(limit int) *headTailBuffer {
	return &headTailBuffer{limit: limit, tail: make([]byte, limit)}
}

func (b *headTailBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	n := len(p)
	if room := b.limit - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		k := copy(b.tail[b.pos:], p)
		p = p[k:]
		b.pos += k
		if b.pos == b.limit {
			b.pos, b.full = 0, true
		}
	}
	return n, nil
}

// String returns everything kept; when bytes were dropped in the middle a
// marker stands in for them.
func (b *headTailBuffer) String() string {
	var tail []byte
	if b.full {
		tail = append(append(tail, b.tail[b.pos:]...), b.tail[:b.pos]...)
	} else {
		tail = b.tail[:b.pos]
	}
	dropped := b.total - int64(len(b.head)) - int64(len(tail))
	if dropped <= 0 {
		return string(b.head) + string(tail)
	}
	return fmt.Sprintf("%s\n\n[... %d bytes truncated ...]\n\n%s", b.head, dropped, tail)
}
