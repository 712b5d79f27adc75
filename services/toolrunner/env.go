package toolrunner

import (
	"os"
	"strings"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/redact"
)

// secrets are what the runner knows to be credentials beyond the naming
// conventions: the variables herald.yaml names as key holders (api_key_env)
// and the keys themselves, whatever variable holds them.
type secrets struct {
	names  map[string]bool
	values map[string]bool
	// keys finds the keys, or any run of 12 or more of their characters, in
	// what a tool returns.
	keys redact.Secrets
}

func secretsOf(c config.Config) secrets {
	s := secrets{names: map[string]bool{}, values: map[string]bool{}}
	for _, p := range append([]config.Provider{c.Primary}, c.FallbackProviders...) {
		if p.APIKeyEnv != "" {
			s.names[p.APIKeyEnv] = true
		}
		if p.APIKey != "" {
			s.values[p.APIKey] = true
		}
	}
	keys := make([]string, 0, len(s.values))
	for v := range s.values {
		keys = append(keys, v)
	}
	s.keys = redact.New(keys...)
	return s
}

// scrub removes the keys the runner knows from a tool's output (a file or
// a command that shows one, whole or in part): it is sent to the model and
// kept in the transcript.
func (sec secrets) scrub(text string) string { return sec.keys.String(text) }

// scrubbedEnv is the runner's environment without anything that is or looks
// like a credential or Herald's own settings: a tool (or a prompt-injected
// model) must not be able to read the keys the runtime holds.
func (sec secrets) scrubbedEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if !isSecretName(name) && !sec.names[name] && !sec.values[value] {
			out = append(out, kv)
		}
	}
	return out
}

func isSecretName(name string) bool {
	n := strings.ToUpper(name)
	for _, p := range []string{"HERALD_", "NATS_"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	for _, s := range []string{"_KEY", "APIKEY", "_TOKEN", "_KEY_ID"} {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	for _, c := range []string{"SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY", "NKEY", "CREDS", "API_KEY"} {
		if strings.Contains(n, c) {
			return true
		}
	}
	return false
}
