package config

// ProviderProfile overrides the gateway's provider profile for one provider
// name (the `provider:` of the model or of a fallback entry), under
// `providers:` in herald.yaml. Every field is optional: Profile names the
// built-in profile to start from (default: the one chosen from the provider
// name and base URL), the others replace single conventions of it.
type ProviderProfile struct {
	// Profile is a built-in profile name (openai, groq, mistral, …).
	Profile string `yaml:"profile"`
	// Stream false asks for whole answers even when the caller streams
	// (servers whose streaming breaks tool calls).
	Stream *bool `yaml:"stream"`
	// StreamOptions sends stream_options.include_usage on streamed calls.
	StreamOptions *bool `yaml:"stream_options"`
	// MaxTokensField is max_tokens or max_completion_tokens.
	MaxTokensField string `yaml:"max_tokens_field"`
	// OutputCaps bound max_tokens per model-name prefix.
	OutputCaps map[string]int64 `yaml:"output_caps"`
	// ReasoningEcho is the assistant-message field reasoning is sent back
	// in: none, reasoning_content or reasoning.
	ReasoningEcho string `yaml:"reasoning_echo"`
	// Usage is how streamed usage reports combine: cumulative (each report
	// is the running total) or delta (reports add up).
	Usage string `yaml:"usage"`
	// ReasoningTokens says where reasoning tokens are counted: included (in
	// completion_tokens), separate (beside them) or total_only (only in
	// total_tokens).
	ReasoningTokens string `yaml:"reasoning_tokens"`
	// ThinkTags reads <think>…</think> in the content as reasoning.
	ThinkTags *bool `yaml:"think_tags"`
	// ToolCallIDs is any or alnum9 (nine letters and digits, as Mistral requires).
	ToolCallIDs string `yaml:"tool_call_ids"`
	// ReasoningParam is where a chat request asks for reasoning:
	// reasoning_effort, reasoning (an object, as OpenRouter takes it) or none.
	ReasoningParam string `yaml:"reasoning_param"`
}
