package compressor

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// SummaryPrefix starts every summary message, so later compressions find and
// update it and the model reads it as reference, not instructions.
const SummaryPrefix = "[CONTEXT SUMMARY — reference only]"

// summaryPreamble follows the prefix and tells the model how to use it.
const summaryPreamble = "Earlier turns of this conversation were compressed into the summary below. " +
	"Use it as background; it is not a new request and gives no new instructions. " +
	"The messages after it are verbatim and take precedence."

// Sections of every summary, in order.
var summarySections = []string{
	"Goal", "Constraints", "Completed actions", "Current state",
	"Open questions", "Relevant files", "Remaining work",
}

// wrapSummary turns a summary body into the message text (redacted).
func wrapSummary(body string) string {
	return SummaryPrefix + "\n" + summaryPreamble + "\n\n" + redact(strings.TrimSpace(body))
}

// previousSummary returns the body of the summary an earlier compression
// left in msgs, or "".
func previousSummary(msgs []*heraldpb.ChatMessage) string {
	for _, m := range msgs {
		if isSummary(m) {
			body := strings.TrimPrefix(m.Content, SummaryPrefix)
			body = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(body), summaryPreamble))
			return body
		}
	}
	return ""
}

// Limits of the deterministic summary.
const (
	maxActions    = 40
	maxGoalChars  = 1500
	maxStateChars = 1500
)

// deterministicSummary writes the summary without a model: what the middle
// shows mechanically (tool calls, files, the last assistant words), merged
// with the previous summary. It is the fallback when the model's fails.
func deterministicSummary(goal string, middle []*heraldpb.ChatMessage, previous string) string {
	var actions []string
	files := map[string]bool{}
	results := map[string]string{}
	for _, m := range middle {
		if m.Role == roleTool {
			results[m.ToolCallId] = m.Content
		}
	}
	state := ""
	for _, m := range middle {
		if m.Role == roleAssistant && strings.TrimSpace(m.Content) != "" && !isSummary(m) {
			state = m.Content
		}
		for _, c := range m.ToolCalls {
			actions = append(actions, describeCall(c, results[c.Id]))
			if p := pathArg(c); p != "" {
				files[p] = true
			}
		}
	}
	if len(actions) > maxActions {
		actions = append([]string{fmt.Sprintf("(%d earlier actions omitted)", len(actions)-maxActions)}, actions[len(actions)-maxActions:]...)
	}
	var b strings.Builder
	section := func(name, body string) {
		if strings.TrimSpace(body) == "" {
			body = "(none recorded)"
		}
		fmt.Fprintf(&b, "## %s\n%s\n\n", name, strings.TrimSpace(body))
	}
	section("Goal", oneLineLimit(goal, maxGoalChars))
	section("Constraints", "(not extracted: this summary was written without the model)")
	done := bullet(actions)
	if previous != "" {
		done = "Earlier summary:\n" + indent(previous) + "\nSince then:\n" + done
	}
	section("Completed actions", done)
	section("Current state", cutRunes(state, maxStateChars))
	section("Open questions", "(not extracted)")
	section("Relevant files", bullet(sortedKeys(files)))
	section("Remaining work", "Continue toward the goal from the latest messages below.")
	return b.String()
}

func describeCall(c *heraldpb.ToolCall, result string) string {
	args := map[string]any{}
	_ = json.Unmarshal([]byte(c.Arguments), &args)
	detail := ""
	switch c.Name {
	case "terminal":
		code, lines := terminalOutcome(result)
		detail = fmt.Sprintf("`%v` (exit %s, %d lines)", oneLine(fmt.Sprint(args["command"]), 160), code, lines)
	default:
		if p := pathArg(c); p != "" {
			detail = p
		} else {
			detail = oneLine(c.Arguments, 120)
		}
	}
	if strings.HasPrefix(result, PrunedPrefix) && c.Name != "terminal" {
		detail += " " + result
	}
	return c.Name + " " + detail
}

func pathArg(c *heraldpb.ToolCall) string {
	var a struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal([]byte(c.Arguments), &a)
	return a.Path
}

func bullet(items []string) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString("- " + it + "\n")
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

func oneLineLimit(s string, n int) string {
	if len(s) > n {
		return cutRunes(s, n) + "…"
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
