package gateway

import "sort"

// claudeCaps are the output limits of Claude families whose limit is below
// the gateway's default max_tokens: Claude 3 Haiku/Opus/Sonnet refuse more
// than 4096 ("max_tokens: 8192 > 4096, which is the maximum allowed number
// of output tokens for claude-3-haiku-20240307", continuedev/continue#4225).
// The Claude 4 and 3.7 limits bound max_tokens when it grows to hold a
// thinking budget (https://docs.anthropic.com/en/docs/about-claude/models/overview).
var claudeCaps = map[string]int64{
	"claude-3-haiku":    4096,
	"claude-3-opus":     4096,
	"claude-3-sonnet":   4096,
	"claude-3.5":        8192, // OpenRouter's spelling: anthropic/claude-3.5-haiku
	"claude-3-5":        8192,
	"claude-3-7-sonnet": 64000,
	"claude-3.7-sonnet": 64000,
	"claude-sonnet-4":   64000,
	"claude-haiku-4":    64000,
	"claude-opus-4":     32000,
	"claude-opus-4-5":   64000,
	"claude-opus-4.5":   64000,
}

// compatible is the starting point of every OpenAI-compatible profile:
// usage in a trailing chunk that holds the total, reasoning tokens inside
// completion_tokens, reasoning sent back as reasoning_content (what vLLM,
// SGLang and DeepSeek read; others ignore it).
var compatible = Profile{Stream: true, StreamOptions: true, MaxTokensField: FieldMaxTokens,
	ReasoningEcho: EchoReasoningContent, Usage: UsageCumulative, ReasoningTokens: ReasoningIncluded,
	ReasoningParam: ReasoningParamEffort}

func like(p Profile, edit func(*Profile)) Profile {
	edit(&p)
	return p
}

// builtinProfiles are the providers the gateway knows; docs/PROVIDERS.md
// gives each quirk's source.
var builtinProfiles = map[string]Profile{
	"generic": compatible,
	// OpenAI refuses max_tokens on reasoning models and unknown message fields.
	"openai": like(compatible, func(p *Profile) { p.MaxTokensField, p.ReasoningEcho = FieldMaxCompletionTokens, "" }),
	"azure":  like(compatible, func(p *Profile) { p.MaxTokensField, p.ReasoningEcho = FieldMaxCompletionTokens, "" }),
	// Anthropic's own API (anthropic_messages); caps by model family.
	"anthropic": like(compatible, func(p *Profile) { p.ReasoningEcho, p.OutputCaps = "", claudeCaps }),
	// OpenRouter reads reasoning back as `reasoning`; Claude caps apply to anthropic/… models.
	// It takes reasoning as an object ({"effort"} or {"max_tokens"}) for any model.
	"openrouter": like(compatible, func(p *Profile) {
		p.ReasoningEcho, p.OutputCaps, p.ReasoningParam = EchoReasoning, claudeCaps, ReasoningParamObject
	}),
	// Groq repeats the usage of the finish chunk (x_groq.usage) in a trailing
	// chunk, and answers 400 to reasoning_content on assistant messages.
	"groq": like(compatible, func(p *Profile) { p.ReasoningEcho = "" }),
	// xAI bills reasoning tokens as output beside completion_tokens.
	"xai": like(compatible, func(p *Profile) { p.ReasoningEcho, p.ReasoningTokens = "", ReasoningSeparate }),
	// DeepSeek's thinking mode requires reasoning_content back after tool calls.
	// Its reasoning is chosen by model (deepseek-reasoner), not by a field.
	"deepseek": like(compatible, func(p *Profile) { p.ReasoningParam = ReasoningParamNone }),
	// Mistral refuses stream_options (422 extra_forbidden) and unknown
	// fields; Magistral sends content as typed chunks (thinking, text).
	// Mistral also takes only nine-character alphanumeric tool-call ids.
	// Magistral reasons by model; reasoning_effort would be an unknown field.
	"mistral": like(compatible, func(p *Profile) {
		p.StreamOptions, p.ReasoningEcho, p.ToolCallIDs, p.ReasoningParam = false, "", IDsAlnum9, ReasoningParamNone
	}),
	// Gemini's OpenAI endpoint counts thinking only in total_tokens, and has
	// refused stream_options ("Unknown name \"stream_options\"") while its
	// chunks carry usage anyway.
	"gemini": like(compatible, func(p *Profile) {
		p.StreamOptions, p.ReasoningEcho, p.ReasoningTokens = false, "", ReasoningTotalOnly
	}),
	// Perplexity prices each request by its search context size (a fee);
	// reasoning is chosen by model (sonar-reasoning).
	"perplexity": like(compatible, func(p *Profile) { p.ReasoningEcho, p.ReasoningParam = "", ReasoningParamNone }),
	// Together and Fireworks serve open reasoning models (DeepSeek-R1, Qwen)
	// whose reasoning may arrive inline in <think> tags.
	"together":  like(compatible, func(p *Profile) { p.ReasoningEcho, p.ThinkTags = "", true }),
	"fireworks": like(compatible, func(p *Profile) { p.ReasoningEcho, p.ThinkTags = "", true }),
	// Local servers: reasoning in `reasoning` (Ollama), reasoning_content
	// (vLLM, llama.cpp, LM Studio) or inline <think> tags when no reasoning
	// parser is configured.
	"ollama":   like(compatible, func(p *Profile) { p.ThinkTags = true }),
	"vllm":     like(compatible, func(p *Profile) { p.ThinkTags = true }),
	"llamacpp": like(compatible, func(p *Profile) { p.ThinkTags = true }),
	"lmstudio": like(compatible, func(p *Profile) { p.ThinkTags = true }),
}

// profileAliases map other spellings of provider names to profiles.
var profileAliases = map[string]string{
	"azure-openai": "azure", "azure_openai": "azure", "google": "gemini", "x-ai": "xai", "grok": "xai",
	"llama.cpp": "llamacpp", "llama-cpp": "llamacpp", "lm-studio": "lmstudio", "lm_studio": "lmstudio",
	"codex": "openai", "openai-codex": "openai", "together_ai": "together", "togetherai": "together",
}

// hostProfiles recognise a provider from its base URL's host (or a
// subdomain of it).
var hostProfiles = []struct{ host, profile string }{
	{"api.openai.com", "openai"},
	{"openai.azure.com", "azure"},
	{"services.ai.azure.com", "azure"},
	{"cognitiveservices.azure.com", "azure"},
	{"api.anthropic.com", "anthropic"},
	{"openrouter.ai", "openrouter"},
	{"api.groq.com", "groq"},
	{"api.x.ai", "xai"},
	{"api.deepseek.com", "deepseek"},
	{"api.mistral.ai", "mistral"},
	{"generativelanguage.googleapis.com", "gemini"},
	{"api.together.xyz", "together"},
	{"api.together.ai", "together"},
	{"api.fireworks.ai", "fireworks"},
	{"api.perplexity.ai", "perplexity"},
}

// localPorts recognise local servers on their default ports.
var localPorts = map[string]string{"11434": "ollama", "8000": "vllm", "8080": "llamacpp", "1234": "lmstudio"}

func profileNames() []string {
	names := make([]string, 0, len(builtinProfiles))
	for n := range builtinProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
