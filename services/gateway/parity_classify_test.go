package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hermes' classifier examples (tests/agent/test_error_classifier.py,
// HERMES-TESTS.md §8 table (a)) with a status: the provider's message as
// the body's error.message, classified by the real classifier. Hermes'
// reasons map onto Herald's classes by name; content_policy_blocked is
// Herald's content_policy.
// Herald deliberately differs for a request the provider refuses (400/422,
// unsupported or unknown parameters): Hermes says format_error, Herald
// says invalid_request, which is not retried and ends the run failed.
func TestParityClassifierTable(t *testing.T) {
	cases := []struct {
		status int
		msg    string
		code   string
		want   ErrorClass
	}{
		{401, "Unauthorized", "", ClassAuth},
		{403, "Forbidden", "", ClassAuth},
		{403, "Key limit exceeded for this key", "", ClassBilling},
		{403, "spending limit reached", "", ClassBilling},
		{403, "This plan does not include the requested model", "", ClassBilling},
		{402, "Payment Required", "", ClassBilling},
		{402, "Your API key has run out of funds", "", ClassBilling},
		{402, "usage limit exceeded, try again later", "", ClassRateLimit},
		{402, "余额不足", "", ClassBilling},
		{402, "Usage limit reached, try again in 5 minutes", "", ClassRateLimit},
		{402, "quota exceeded, please retry after the window resets", "", ClassRateLimit},
		{402, "quota exceeded", "", ClassBilling},
		{402, "insufficient credits to complete request", "", ClassBilling},
		{404, "Model 'gpt-5' is not available on the Free Tier", "", ClassBilling},
		{404, "model not found", "", ClassModelNotFound},
		{404, "openrouter/nonexistent-model is not a valid model ID", "", ClassModelNotFound},
		{429, "Too Many Requests", "", ClassRateLimit},
		{400, "Upstream error from Alibaba: Request rate increased too quickly", "", ClassRateLimit},
		{500, "Internal Server Error", "", ClassServerError},
		{502, "Bad Gateway", "", ClassServerError},
		{503, "Service Unavailable", "", ClassOverloaded},
		{529, "Overloaded", "", ClassOverloaded},
		{502, "Unsupported parameter: logprobs", "", ClassInvalidRequest},
		{413, "Request Entity Too Large", "", ClassPayloadTooLarge},
		{400, "context length exceeded: 250000 > 200000", "", ClassContextOverflow},
		{400, "too many tokens", "", ClassContextOverflow},
		{400, "prompt is too long: 300000 tokens > 200000 maximum", "", ClassContextOverflow},
		{400, "超过最大长度限制", "", ClassContextOverflow},
		{400, "The engine prompt length 1327246 exceeds the max_model_len 131072", "", ClassContextOverflow},
		{400, "prompt length 200000 exceeds maximum model length 131072", "", ClassContextOverflow},
		{400, "input is too long for model", "", ClassContextOverflow},
		{400, "slot context: 4096 tokens, prompt 8192 tokens", "", ClassContextOverflow},
		{400, "context size has been exceeded", "", ClassContextOverflow},
		{400, "Prompt exceeds max length", "", ClassContextOverflow},
		{400, "This endpoint's maximum context length is 128000 tokens. Please reduce the length of the messages.", "", ClassContextOverflow},
		{400, "This model's maximum context length is 128000 tokens, however you requested 150000 tokens.", "", ClassContextOverflow},
		{400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "unsupported_parameter", ClassInvalidRequest},
		{400, "Unknown parameter: 'foo'.", "", ClassInvalidRequest},
		{400, "Invalid value for parameter 'temperature'", "", ClassInvalidRequest},
		{422, "Unprocessable Entity", "", ClassInvalidRequest},
		{400, "Your request was flagged by the moderation system as potentially violating OpenAI's usage policies.", "", ClassContentPolicy},
		{400, "This content was flagged for possible cybersecurity risk. Trusted Access for Cyber program.", "", ClassContentPolicy},
		{400, "The response was filtered: ResponsibleAIPolicyViolation (finish_reason=content_filter).", "", ClassContentPolicy},
		{400, "Your prompt was flagged by our safety system", "", ClassContentPolicy},
		{0, "This content was flagged for possible cybersecurity risk. Trusted Access for Cyber program.", "", ClassContentPolicy},
		{400, "bad request: missing field 'model'", "", ClassInvalidRequest},
		{500, "", "", ClassServerError},
		{400, "", "context_length_exceeded", ClassContextOverflow},
		{400, "", "insufficient_quota", ClassBilling},
		{404, "", "model_not_found", ClassModelNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.msg+tc.code, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": tc.msg, "code": tc.code}})
			got := classifyStatus(&statusError{status: tc.status, body: string(body)})
			require.Equal(t, tc.want, got.class, "HTTP %d %q", tc.status, tc.msg)
		})
	}
}

// Hermes' examples without a status. In Herald they arrive as an error event
// inside a stream (status 0), classified by the provider's words alone.
func TestParityClassifierWithoutAStatus(t *testing.T) {
	cases := []struct {
		msg, code string
		want      ErrorClass
	}{
		{"insufficient credits to complete this request", "", ClassBilling},
		{"Model 'gpt-5' is not available on the Free Tier.", "", ClassBilling},
		{"rate limit reached for this model", "", ClassRateLimit},
		{"invalid api key provided", "", ClassAuth},
		{"gpt-99 is not a valid model", "", ClassModelNotFound},
		{"maximum context length exceeded", "", ClassContextOverflow},
		{"usage limit exceeded, try again in 5 minutes", "", ClassRateLimit},
		{"usage limit reached", "", ClassBilling},
		{"quota exceeded, resets at midnight UTC", "", ClassRateLimit},
		{"key limit exceeded, please wait before retrying", "", ClassRateLimit},
		{"something weird happened", "", ClassUnknown},
		{"", "", ClassUnknown},
		{"", "resource_exhausted", ClassRateLimit},
		{"", "model_not_found", ClassModelNotFound},
		{"", "context_length_exceeded", ClassContextOverflow},
		{"", "model_not_supported_on_free_tier", ClassBilling},
	}
	for _, tc := range cases {
		t.Run(tc.msg+tc.code, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": tc.msg, "code": tc.code}})
			require.Equal(t, tc.want, classifyStatus(&statusError{body: string(body)}).class)
		})
	}
}

// Hermes' OpenRouter metadata.raw and body-shape edge cases.
func TestParityClassifierBodyShapes(t *testing.T) {
	raw := func(inner string) string {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "Provider returned error",
			"metadata": map[string]any{"raw": inner}}})
		return string(b)
	}
	cases := []struct {
		status int
		body   string
		want   ErrorClass
	}{
		{400, raw(`{"error":{"message":"context length exceeded: 50000 > 32768"}}`), ClassContextOverflow},
		{429, raw("Rate limit exceeded. Please retry after 30s."), ClassRateLimit},
		{404, raw("The model gpt-99 does not exist"), ClassModelNotFound},
		{500, "", ClassServerError},
		{400, "just a string", ClassInvalidRequest},
		{500, `["a","list"]`, ClassServerError},
		{422, `{"error":{"message":{"nested":"dict"}}}`, ClassInvalidRequest},
		{200, `{"error":{"message":"odd"}}`, ClassUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.body, func(t *testing.T) {
			ae := classifyStatus(&statusError{status: tc.status, body: tc.body})
			require.Equal(t, tc.want, ae.class)
			require.NotEmpty(t, ae.Error(), "a message, never a crash")
		})
	}
}
