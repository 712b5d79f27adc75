package accounting

import "strconv"

// loopOrder sorts spans as the loop ran them: by turn and step, a step's
// model attempts, then its tool calls, then the subagents it delegated to
// (each in its own order); spans of no known step (a compression's summary
// call) last, by time.
func loopOrder(a, b TraceSpan) bool {
	ka, kb := a.turn == 0, b.turn == 0
	switch {
	case ka != kb:
		return kb
	case ka:
		return a.Start.Before(b.Start)
	case a.turn != b.turn:
		return a.turn < b.turn
	case a.Step != b.Step:
		return a.Step < b.Step
	case a.Subagent != b.Subagent:
		return a.Subagent < b.Subagent // "" (the session's own) first
	case a.sub != b.sub:
		return a.sub.turn < b.sub.turn || a.sub.turn == b.sub.turn && a.sub.step < b.sub.step
	case a.Kind != b.Kind:
		return a.Kind == "model"
	}
	return a.seq < b.seq
}

// group is the step a span is laid out in: tool calls of one group run side
// by side, model attempts one after the other.
func (sp TraceSpan) group() string {
	return strconv.Itoa(sp.turn) + "/" + strconv.Itoa(sp.Step) + "/" + sp.Subagent + "/" +
		strconv.Itoa(sp.sub.turn) + "/" + strconv.Itoa(sp.sub.step)
}

// markAttempts marks, within each step, an attempt after a failed one as a
// retry (same model) or a fallback (another), and gives the step's answer
// to the attempt that produced it.
func markAttempts(spans []TraceSpan, msgs map[string]transcriptIndex, session string) {
	for i := range spans {
		sp := &spans[i]
		if sp.Kind != "model" || sp.turn == 0 {
			continue
		}
		if i > 0 && spans[i-1].Kind == "model" && spans[i-1].group() == sp.group() {
			sp.Retry, sp.Fallback = spans[i-1].Model == sp.Model, spans[i-1].Model != sp.Model
		}
		key, sid := stepKey{sp.turn, sp.Step}, session
		if sp.Subagent != "" {
			key, sid = sp.sub, sp.Subagent
		}
		if m := msgs[sid].answers[key]; m != nil && sp.Status == "ok" {
			sp.Output = excerpt(answerText(m))
		}
	}
}

func groupTurns(spans []TraceSpan, prompts map[int]string) []TraceTurn {
	var turns []TraceTurn
	at := map[int]int{}
	for _, sp := range spans {
		i, ok := at[sp.turn]
		if !ok {
			i, at[sp.turn] = len(turns), len(turns)
			turns = append(turns, TraceTurn{Turn: sp.turn, Prompt: excerpt(prompts[sp.turn])})
		}
		turns[i].CostNanoUSD += sp.CostNanoUSD
		turns[i].Spans = append(turns[i].Spans, sp)
	}
	return turns
}

// place lays the spans end to end (a step's tool calls side by side) and
// sets each one's position on a timeline as long as the whole.
func place(tr *SessionTrace) {
	var cursor, stepEnd int64
	last := ""
	for ti := range tr.Turns {
		for si := range tr.Turns[ti].Spans {
			sp := &tr.Turns[ti].Spans[si]
			if g := sp.group(); g != last || sp.Kind == "model" || sp.turn == 0 {
				cursor, last = stepEnd, g
			}
			sp.OffsetMs = cursor
			stepEnd = max(stepEnd, cursor+max(sp.DurationMs, 0))
			if sp.Kind == "model" {
				cursor = stepEnd
			}
			if tr.Start.IsZero() || sp.Start.Before(tr.Start) {
				tr.Start = sp.Start.UTC()
			}
		}
	}
	tr.DurationMs = max(stepEnd, 1)
	for ti := range tr.Turns {
		for si := range tr.Turns[ti].Spans {
			sp := &tr.Turns[ti].Spans[si]
			// A bar is at least minBar wide, so an instant call stays visible.
			sp.WidthPct = max(100*float64(sp.DurationMs)/float64(tr.DurationMs), minBar)
			sp.LeftPct = min(100*float64(sp.OffsetMs)/float64(tr.DurationMs), 100-sp.WidthPct)
		}
	}
}
