package config

import "fmt"

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

	// MaxConcurrent caps the calls in flight to this provider across every
	// gateway process on the bus (0: no cap but the gateway's own).
	MaxConcurrent int `yaml:"max_concurrent"`
	// RPM caps the requests sent to it per minute, across every gateway.
	RPM int `yaml:"rpm"`
	// TPM caps the tokens (prompt and answer) per minute, across every gateway.
	TPM int `yaml:"tpm"`
}

// Limited reports whether the profile sets a limit shared by the gateways.
func (p ProviderProfile) Limited() bool {
	return p.MaxConcurrent > 0 || p.RPM > 0 || p.TPM > 0
}

// validateLimits checks the providers' limits: none may be negative.
func (c Config) validateLimits() []error {
	var errs []error
	for name, p := range c.Providers {
		for key, v := range map[string]int{"max_concurrent": p.MaxConcurrent, "rpm": p.RPM, "tpm": p.TPM} {
			if v < 0 {
				errs = append(errs, fmt.Errorf("providers.%s.%s must not be negative (0: no limit)", name, key))
			}
		}
	}
	return errs
}
