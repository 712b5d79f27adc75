package gateway

import "strings"

// thinkSplitter separates reasoning that a model writes inline as
// <think>…</think> (DeepSeek-R1 and Qwen3 served without a reasoning
// parser: Ollama, vLLM, llama.cpp, LM Studio, Together, Fireworks) from the
// answer, across chunk boundaries: a possible tag split between chunks is
// held back until the next chunk decides it.
type thinkSplitter struct {
	inThink bool
	pending string
	// trim drops the whitespace that opens a span (the blank lines after
	// </think> would otherwise start the answer).
	trim bool
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// feed returns the answer text and the reasoning text chunk completes.
func (t *thinkSplitter) feed(chunk string) (text, reasoning string) {
	s := t.pending + chunk
	t.pending = ""
	var out, think strings.Builder
	for s != "" {
		tag := thinkOpen
		if t.inThink {
			tag = thinkClose
		}
		if i := strings.Index(s, tag); i >= 0 {
			t.write(&out, &think, s[:i])
			s = s[i+len(tag):]
			t.inThink, t.trim = !t.inThink, true
			continue
		}
		keep := partialSuffix(s, tag)
		t.write(&out, &think, s[:len(s)-keep])
		t.pending = s[len(s)-keep:]
		break
	}
	return out.String(), think.String()
}

// flush releases what was held back at the end of the answer.
func (t *thinkSplitter) flush() (text, reasoning string) {
	var out, think strings.Builder
	t.write(&out, &think, t.pending)
	t.pending = ""
	return out.String(), think.String()
}

func (t *thinkSplitter) write(out, think *strings.Builder, s string) {
	if t.trim {
		s = strings.TrimLeft(s, " \t\r\n")
		t.trim = s == ""
	}
	if t.inThink {
		think.WriteString(s)
		return
	}
	out.WriteString(s)
}
