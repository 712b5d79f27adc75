package gateway

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/heraldrun/herald/pkg/config"
)

// Profile is what the gateway knows of one provider's conventions: which
// request fields it accepts, where it puts reasoning and usage, and how its
// tokens are counted. One is chosen per endpoint from the provider name and
// base URL (profiles.go) and can be overridden under `providers:` in
// herald.yaml. docs/PROVIDERS.md lists every profile with its sources.
type Profile struct {
	Name string
	// Stream false: answers are always asked for whole (stream: false),
	// for servers whose streaming breaks tool calls.
	Stream bool
	// StreamOptions: stream_options.include_usage is sent on streamed calls
	// (Mistral refuses the field with 422).
	StreamOptions bool
	// MaxTokensField names the output limit: max_tokens or
	// max_completion_tokens (OpenAI's reasoning models refuse max_tokens).
	MaxTokensField string
	// OutputCaps bound the output limit by model-name prefix (longest wins).
	OutputCaps map[string]int64
	// ReasoningEcho is the assistant-message field earlier reasoning is sent
	// back in; "" sends none (OpenAI, Groq and Mistral refuse unknown fields).
	ReasoningEcho string
	// Usage says how the usage reports of one stream combine.
	Usage UsageCombine
	// ReasoningTokens says where the provider counts reasoning tokens.
	ReasoningTokens ReasoningCount
	// ThinkTags: reasoning arrives inline as <think>…</think> in the content.
	ThinkTags bool
	// ToolCallIDs is the id format the provider accepts in a history:
	// "" any, or IDsAlnum9 (Mistral: exactly nine letters and digits).
	ToolCallIDs string
	// ReasoningParam is where a chat-completions request asks for
	// reasoning: reasoning_effort, reasoning (OpenRouter's object) or none.
	// Which models take it is the profile's own knowledge (reasoning.go).
	ReasoningParam string
}

// IDsAlnum9 is Mistral's tool-call id format ("Tool call id was call_0fypS1hVX
// but must be a-z, A-Z, 0-9, with a length of 9").
const IDsAlnum9 = "alnum9"

// UsageCombine is how several usage reports of one stream add up.
type UsageCombine string

const (
	// UsageCumulative: each report is the running total; the last one
	// holding a count wins (OpenAI's trailing chunk; Groq's x_groq copy).
	UsageCumulative UsageCombine = "cumulative"
	// UsageDelta: each report counts only what is new; they add up.
	UsageDelta UsageCombine = "delta"
)

// ReasoningCount is where a provider counts reasoning tokens. Herald always
// records output_tokens with reasoning included and reasoning_tokens as the
// part of them that was reasoning, so a usage row prices as
// output_tokens × output price whatever the provider's convention.
type ReasoningCount string

const (
	// ReasoningIncluded: completion_tokens already holds the reasoning
	// tokens, completion_tokens_details.reasoning_tokens says how many.
	ReasoningIncluded ReasoningCount = "included"
	// ReasoningSeparate: reasoning_tokens are billed as output beside
	// completion_tokens (xAI).
	ReasoningSeparate ReasoningCount = "separate"
	// ReasoningTotalOnly: reasoning tokens appear only in total_tokens, as
	// total − prompt − completion (Gemini's OpenAI-compatible endpoint).
	ReasoningTotalOnly ReasoningCount = "total_only"
)

// Reasoning echo fields.
const (
	EchoNone             = "none"
	EchoReasoningContent = "reasoning_content"
	EchoReasoning        = "reasoning"
)

// Output-limit fields.
const (
	FieldMaxTokens           = "max_tokens"
	FieldMaxCompletionTokens = "max_completion_tokens"
)

// outputLimit is the output limit to send for model: the caller's (or def
// when it asked for none), bounded by the model family's cap. 0: send none.
func (p Profile) outputLimit(model string, asked, def int64) int64 {
	limit := asked
	if limit <= 0 {
		limit = def
	}
	if c := p.outputCap(model); c > 0 && (limit <= 0 || limit > c) {
		limit = c
	}
	return limit
}

// outputCap is the cap of the longest prefix of model (vendor prefix such
// as "anthropic/" removed) among OutputCaps; 0 when none matches.
func (p Profile) outputCap(model string) int64 {
	short := strings.ToLower(model)
	if i := strings.LastIndex(short, "/"); i >= 0 {
		short = short[i+1:]
	}
	best, limit := "", int64(0)
	for prefix, c := range p.OutputCaps {
		if strings.HasPrefix(short, prefix) && len(prefix) > len(best) {
			best, limit = prefix, c
		}
	}
	return limit
}

// profileFor chooses the profile of a provider entry: an explicit
// `providers.<name>.profile`, else the provider's name, else the host of
// its base URL, else the generic OpenAI-compatible one; then applies the
// entry's field overrides.
func profileFor(name, baseURL string, overrides map[string]config.ProviderProfile) (Profile, error) {
	o := overrides[name]
	key := strings.ToLower(o.Profile)
	if alias, ok := profileAliases[key]; ok {
		key = alias
	}
	if key == "" {
		key = profileKey(name, baseURL)
	}
	p, ok := builtinProfiles[key]
	if !ok {
		return Profile{}, fmt.Errorf("gateway: providers.%s.profile %q is not a known profile (%s)", name, key, strings.Join(profileNames(), ", "))
	}
	p.Name = key
	return p.with(o, name)
}

// profileKey finds the built-in profile of a provider name or base URL.
func profileKey(name, baseURL string) string {
	name = strings.ToLower(name)
	u, err := url.Parse(baseURL)
	if err != nil {
		return "generic"
	}
	host := strings.ToLower(u.Hostname())
	// "openai" is also the default provider name, kept by users who only
	// set HERALD_BASE_URL to a compatible server: there the URL decides.
	defaulted := name == "openai" && host != "" && host != "api.openai.com"
	if alias, ok := profileAliases[name]; ok && !defaulted {
		return alias
	}
	if _, ok := builtinProfiles[name]; ok && !defaulted {
		return name
	}
	for _, h := range hostProfiles {
		if host == h.host || strings.HasSuffix(host, "."+h.host) {
			return h.profile
		}
	}
	if isLocal(baseURL) {
		if p, ok := localPorts[u.Port()]; ok {
			return p
		}
	}
	return "generic"
}

// with applies herald.yaml's field overrides of provider name to p.
func (p Profile) with(o config.ProviderProfile, name string) (Profile, error) {
	if o.Stream != nil {
		p.Stream = *o.Stream
	}
	if o.StreamOptions != nil {
		p.StreamOptions = *o.StreamOptions
	}
	if o.ThinkTags != nil {
		p.ThinkTags = *o.ThinkTags
	}
	if len(o.OutputCaps) > 0 {
		caps := map[string]int64{}
		for k, v := range p.OutputCaps {
			caps[k] = v
		}
		for k, v := range o.OutputCaps {
			caps[strings.ToLower(k)] = v
		}
		p.OutputCaps = caps
	}
	var errs []string
	set := func(field string, dst *string, v string, allowed ...string) {
		if v == "" {
			return
		}
		for _, a := range allowed {
			if v == a {
				*dst = v
				return
			}
		}
		errs = append(errs, fmt.Sprintf("providers.%s.%s must be one of %s, got %q", name, field, strings.Join(allowed, ", "), v))
	}
	set("max_tokens_field", &p.MaxTokensField, o.MaxTokensField, FieldMaxTokens, FieldMaxCompletionTokens)
	ids := p.ToolCallIDs
	set("tool_call_ids", &ids, o.ToolCallIDs, "any", IDsAlnum9)
	if p.ToolCallIDs = ids; ids == "any" {
		p.ToolCallIDs = ""
	}
	echo := p.ReasoningEcho
	set("reasoning_echo", &echo, o.ReasoningEcho, EchoNone, EchoReasoningContent, EchoReasoning)
	if p.ReasoningEcho = echo; echo == EchoNone {
		p.ReasoningEcho = ""
	}
	set("reasoning_param", &p.ReasoningParam, o.ReasoningParam, ReasoningParamEffort, ReasoningParamObject, ReasoningParamNone)
	usage, count := string(p.Usage), string(p.ReasoningTokens)
	set("usage", &usage, o.Usage, string(UsageCumulative), string(UsageDelta))
	set("reasoning_tokens", &count, o.ReasoningTokens, string(ReasoningIncluded), string(ReasoningSeparate), string(ReasoningTotalOnly))
	p.Usage, p.ReasoningTokens = UsageCombine(usage), ReasoningCount(count)
	if len(errs) > 0 {
		return Profile{}, fmt.Errorf("gateway: %s", strings.Join(errs, "; "))
	}
	return p, nil
}
