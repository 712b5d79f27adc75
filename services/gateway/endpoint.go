package gateway

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/heraldrun/herald/pkg/config"
)

// API modes: the three wire protocols the gateway speaks.
const (
	ModeChatCompletions   = "chat_completions"
	ModeCodexResponses    = "codex_responses"
	ModeAnthropicMessages = "anthropic_messages"
)

// endpoint is one provider entry resolved for use: where to send, how, and
// with which credential. The key never leaves this struct except as a header.
type endpoint struct {
	provider string
	model    string
	baseURL  string
	apiKey   string
	mode     string
	profile  Profile
	// index is 0 for the primary, i for fallback_providers[i-1].
	index int
}

func (e endpoint) isFallback() bool { return e.index > 0 }

// defaultBaseURLs are used when a provider entry names no base_url.
var defaultBaseURLs = map[string]string{
	"openai":     "https://api.openai.com/v1",
	"codex":      "https://api.openai.com/v1",
	"anthropic":  "https://api.anthropic.com",
	"openrouter": "https://openrouter.ai/api/v1",
	"deepseek":   "https://api.deepseek.com/v1",
	"google":     "https://generativelanguage.googleapis.com/v1beta/openai",
	"gemini":     "https://generativelanguage.googleapis.com/v1beta/openai",
	"ollama":     "http://127.0.0.1:11434/v1",
	"groq":       "https://api.groq.com/openai/v1",
	"xai":        "https://api.x.ai/v1",
	"mistral":    "https://api.mistral.ai/v1",
	"together":   "https://api.together.xyz/v1",
	"fireworks":  "https://api.fireworks.ai/inference/v1",
	"vllm":       "http://127.0.0.1:8000/v1",
	"llamacpp":   "http://127.0.0.1:8080/v1",
	"lmstudio":   "http://127.0.0.1:1234/v1",
}

func newEndpoint(p config.Provider, index int, overrides map[string]config.ProviderProfile) (endpoint, error) {
	mode, err := resolveAPIMode(p)
	if err != nil {
		return endpoint{}, err
	}
	name := strings.ToLower(p.Provider)
	base := p.BaseURL
	if base == "" {
		base = defaultBaseURLs[name]
	}
	if base == "" {
		base = defaultBaseURLs["openai"]
	}
	if name == "" {
		name = providerFromURL(base)
	}
	prof, err := profileFor(name, base, overrides)
	if err != nil {
		return endpoint{}, err
	}
	return endpoint{provider: name, model: p.Model, baseURL: strings.TrimRight(base, "/"),
		apiKey: p.APIKey, mode: mode, profile: prof, index: index}, nil
}

// resolveAPIMode applies BEHAVIOURS.md's order: explicit setting, provider
// name, base-URL heuristics, then chat_completions.
func resolveAPIMode(p config.Provider) (string, error) {
	switch p.APIMode {
	case ModeChatCompletions, ModeCodexResponses, ModeAnthropicMessages:
		return p.APIMode, nil
	case "":
	default:
		return "", fmt.Errorf("gateway: api_mode %q of provider %q is not one of %s, %s, %s",
			p.APIMode, p.Provider, ModeChatCompletions, ModeCodexResponses, ModeAnthropicMessages)
	}
	switch strings.ToLower(p.Provider) {
	case "anthropic":
		return ModeAnthropicMessages, nil
	case "codex", "openai-codex":
		return ModeCodexResponses, nil
	}
	if u, err := url.Parse(p.BaseURL); err == nil && p.BaseURL != "" {
		if strings.EqualFold(u.Hostname(), "api.anthropic.com") || strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/anthropic") {
			return ModeAnthropicMessages, nil
		}
	}
	return ModeChatCompletions, nil
}

// isLocal reports whether base points at this machine (Ollama, vLLM, …),
// where no API key is needed.
func isLocal(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	switch h := u.Hostname(); h {
	case "localhost", "0.0.0.0":
		return true
	default:
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
}

func providerFromURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return "custom"
	}
	if isLocal(base) {
		return "local"
	}
	return u.Hostname()
}

// String names the endpoint in messages a person reads; never the key.
func (e endpoint) String() string {
	return fmt.Sprintf("%s (model %s)", e.provider, e.model)
}

// isOpenAI reports whether e is OpenAI's own API (not a compatible server).
func (e endpoint) isOpenAI() bool {
	return e.provider == "openai" || strings.Contains(e.baseURL, "api.openai.com")
}
