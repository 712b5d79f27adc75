package accounting

import (
	"strconv"
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// transcriptIndex is what the trace needs from a transcript.
type transcriptIndex struct {
	answers map[stepKey]*heraldpb.ChatMessage
	results map[string]string // tool results by the model's call id
	prompts map[int]string    // each turn's user prompt
}

func indexTranscript(entries []*heraldpb.TranscriptEntry) transcriptIndex {
	ix := transcriptIndex{answers: map[stepKey]*heraldpb.ChatMessage{}, results: map[string]string{}, prompts: map[int]string{}}
	steps := map[int]int{}
	for _, e := range entries {
		m, turn := e.GetMessage(), int(e.GetTurn())
		switch m.GetRole() {
		case "user":
			if _, ok := ix.prompts[turn]; !ok {
				ix.prompts[turn] = m.GetContent()
			}
		case "assistant":
			steps[turn]++
			ix.answers[stepKey{turn, steps[turn]}] = m
		case "tool":
			ix.results[m.GetToolCallId()] = m.GetContent()
		}
	}
	return ix
}

func answerText(m *heraldpb.ChatMessage) string {
	text := m.GetContent()
	if len(m.GetToolCalls()) > 0 {
		var names []string
		for _, c := range m.GetToolCalls() {
			names = append(names, c.GetName())
		}
		if text != "" {
			text += "\n"
		}
		text += "→ calls " + strings.Join(names, ", ")
	}
	return text
}

// stepOfEvent reads turn and step from a usage event id of the session's
// own requests; 0, 0 for others (a compression's summary call).
func stepOfEvent(sid, eventID string) (turn, step int) {
	rest, ok := strings.CutPrefix(eventID, sid+":")
	if !ok {
		return 0, 0
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 4 {
		return 0, 0
	}
	turn, err1 := strconv.Atoi(parts[0])
	step, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return turn, step
}

// stepOfCall reads turn, step and call index from a loop call id.
func stepOfCall(callID string) (turn, step, index int) {
	var n [3]int
	rest := callID
	for i, sep := range []string{"t", "s", "c"} {
		var ok bool
		if rest, ok = strings.CutPrefix(rest, sep); !ok {
			return 0, 0, -1
		}
		j := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if j < 0 {
			j = len(rest)
		}
		v, err := strconv.Atoi(rest[:j])
		if err != nil {
			return 0, 0, -1
		}
		n[i], rest = v, rest[j:]
	}
	if rest != "" {
		return 0, 0, -1
	}
	return n[0], n[1], n[2]
}
