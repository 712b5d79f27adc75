package compressor

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// PrunedPrefix starts every one-line summary that replaced a tool output.
const PrunedPrefix = "[pruned "

// maxArgChars: string arguments of old tool calls longer than this (a whole
// file handed to write_file) are shortened too.
const maxArgChars = 1000

// pruneToolOutputs replaces the outputs of tool calls in msgs[from:to] with
// one-line summaries and shortens their long arguments. It returns a new
// slice (msgs is not modified) and how many outputs it pruned.
func pruneToolOutputs(msgs []*heraldpb.ChatMessage, from, to, minChars int) ([]*heraldpb.ChatMessage, int) {
	out := append([]*heraldpb.ChatMessage(nil), msgs...)
	calls := callIndex(msgs)
	pruned := 0
	for i := from; i < to && i < len(out); i++ {
		m := out[i]
		switch {
		case m.Role == roleTool && len(m.Content) >= minChars && !strings.HasPrefix(m.Content, PrunedPrefix):
			out[i] = withContent(m, summarizeOutput(m, calls[m.ToolCallId]))
			pruned++
		case m.Role == roleAssistant && len(m.ToolCalls) > 0:
			out[i] = shortenArguments(m)
		}
	}
	return out, pruned
}

// summarizeOutput is the one-line stand-in for a tool's output.
func summarizeOutput(m *heraldpb.ChatMessage, call *heraldpb.ToolCall) string {
	name := m.Name
	if name == "" && call != nil {
		name = call.Name
	}
	args := map[string]any{}
	if call != nil {
		_ = json.Unmarshal([]byte(call.Arguments), &args)
	}
	str := func(k string) string { s, _ := args[k].(string); return s }
	switch name {
	case "terminal":
		code, lines := terminalOutcome(m.Content)
		return fmt.Sprintf("%sterminal output: `%s` exited %s, %d lines of output]", PrunedPrefix, oneLine(str("command"), 200), code, lines)
	case "read_file":
		return fmt.Sprintf("%sread_file output: %q, %d chars, %d lines]", PrunedPrefix, str("path"), len(m.Content), countLines(m.Content))
	case "write_file":
		return fmt.Sprintf("%swrite_file output: wrote %q, %d lines]", PrunedPrefix, str("path"), countLines(str("content")))
	case "":
		name = "tool"
	}
	return fmt.Sprintf("%s%s output: %d chars]", PrunedPrefix, name, len(m.Content))
}

var exitCodeRe = regexp.MustCompile(`(?i)exit[ _-]?(?:code|status)["']?\s*[:=]?\s*(-?\d+)`)

// terminalOutcome reads the exit code and output line count of a terminal
// result (the tool runner's JSON, or plain text naming an exit code).
func terminalOutcome(content string) (code string, lines int) {
	var reply struct {
		Output   string `json:"output"`
		ExitCode *int   `json:"exit_code"`
	}
	if json.Unmarshal([]byte(content), &reply) == nil && reply.ExitCode != nil {
		return strconv.Itoa(*reply.ExitCode), countLines(reply.Output)
	}
	code = "with an unknown code"
	if m := exitCodeRe.FindStringSubmatch(content); m != nil {
		code = m[1]
	}
	return code, countLines(content)
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimRight(s, "\n"), "\n") + 1
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = cutRunes(s, n) + "…"
	}
	return s
}

// cutRunes returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 character.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// shortenArguments keeps an old tool call readable but drops the bulk of
// long string arguments; the JSON stays valid.
func shortenArguments(m *heraldpb.ChatMessage) *heraldpb.ChatMessage {
	var changed []*heraldpb.ToolCall
	for _, c := range m.ToolCalls {
		changed = append(changed, c)
		if len(c.Arguments) <= maxArgChars {
			continue
		}
		args := map[string]any{}
		if json.Unmarshal([]byte(c.Arguments), &args) != nil {
			continue
		}
		for k, v := range args {
			if s, ok := v.(string); ok && len(s) > maxArgChars {
				keep := cutRunes(s, 200)
				args[k] = fmt.Sprintf("%s… [%d more chars, %d lines, pruned]", keep, len(s)-len(keep), countLines(s))
			}
		}
		data, _ := json.Marshal(args)
		changed[len(changed)-1] = &heraldpb.ToolCall{Id: c.Id, Name: c.Name, Arguments: string(data)}
	}
	cp := withContent(m, m.Content)
	cp.ToolCalls = changed
	return cp
}
