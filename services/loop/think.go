package loop

import (
	"regexp"
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
)

var (
	thinkBlock = regexp.MustCompile(`(?s)<think>(.*?)</think>`)
	// thinkOpen is an unclosed <think> at the start of the text or of a
	// line: the rest is reasoning the output limit or the model cut short.
	thinkOpen = regexp.MustCompile(`(?m)^[ \t]*<think>`)
)

// moveThinking takes <think> blocks that some models (served through
// OpenAI-compatible servers) write into the content and puts them in the
// message's reasoning, so they are never shown or kept as the answer. A
// <think> mentioned mid-sentence is left alone.
func moveThinking(m *heraldpb.ChatMessage) {
	if !strings.Contains(m.Content, "<think>") {
		return
	}
	var reasoning []string
	content := thinkBlock.ReplaceAllStringFunc(m.Content, func(block string) string {
		reasoning = append(reasoning, strings.TrimSpace(thinkBlock.FindStringSubmatch(block)[1]))
		return ""
	})
	if loc := thinkOpen.FindStringIndex(content); loc != nil {
		reasoning = append(reasoning, strings.TrimSpace(content[loc[1]:]))
		content = content[:loc[0]]
	}
	if len(reasoning) == 0 {
		return
	}
	m.Content = strings.TrimSpace(content)
	m.Reasoning = joinText(m.Reasoning, strings.Join(reasoning, "\n\n"))
}
