package gateway

import "strings"

// asRefusal reports an OpenAI refusal (message.refusal, with no content and
// no tool calls) the way every API mode reports one: the model's words as
// the content and finish reason content_filter, as Anthropic's stop_reason
// "refusal" and the Responses API's incomplete "content_filter" already are.
func asRefusal(ans modelAnswer, refusal string) modelAnswer {
	m := ans.message
	if strings.TrimSpace(refusal) == "" || m == nil || strings.TrimSpace(m.Content) != "" || len(m.ToolCalls) > 0 {
		return ans
	}
	m.Content = refusal
	ans.finishReason = "content_filter"
	return ans
}
