package toolrunner

import (
	"cmp"
	"os"
	"regexp"
	"strings"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/redact"
)

// secrets are what the runner knows to be credentials beyond the naming
// conventions: the variables herald.yaml names as key holders (api_key_env,
// budgets.webhook.secret_env) and the secrets themselves, whatever variable
// holds them.
type secrets struct {
	names  map[string]bool
	values map[string]bool
	// keys finds the provider keys, or any run of 12 or more of their
	// characters, in what a tool returns.
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
	// The budget webhook's secret is kept out of commands' environment but
	// not looked for in their output: a short one would cut ordinary text.
	s.names[cmp.Or(c.Budgets.Webhook.SecretEnv, config.DefaultBudgetWebhookSecretEnv)] = true
	if c.Budgets.Webhook.Secret != "" {
		s.values[c.Budgets.Webhook.Secret] = true
	}
	return s
}

// scrub removes the keys the runner knows from a tool's output (a file or
// a command that shows one, whole or in part): it is sent to the model and
// kept in the transcript.
func (sec secrets) scrub(text string) string { return sec.keys.String(text) }

// scrubbedEnv is the runner's environment without anything that is or looks
// like a credential or Herald's own settings: a tool (or a prompt-injected
// model) must not be able to read the keys the runtime holds. It is a
// deny-list, by name and by the shape of the value, so that a command
// still finds the toolchain settings it was started with.
func (sec secrets) scrubbedEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if !isSecretName(name) && !sec.names[name] && !sec.holdsSecret(value) && !looksLikeCredential(value) {
			out = append(out, kv)
		}
	}
	return out
}

// holdsSecret reports whether value is or contains a secret the runner
// knows (a key inside "Bearer <key>" too).
func (sec secrets) holdsSecret(value string) bool {
	for v := range sec.values {
		if value == v || len(v) >= 8 && strings.Contains(value, v) {
			return true
		}
	}
	return false
}

// credentialInValue finds a credential whatever the variable is called: a
// URL's userinfo (postgres://app:pw@db, http://user:pw@proxy,
// https://token@host) or a password pair of a connection string
// (host=db password=pw).
var credentialInValue = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^/?#\s@]+@|\b(password|passwd|pwd)=`)

func looksLikeCredential(value string) bool { return credentialInValue.MatchString(value) }

func isSecretName(name string) bool {
	n := strings.ToUpper(name)
	for _, p := range []string{"HERALD_", "NATS_"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	// _HEADERS: OTEL_EXPORTER_OTLP_HEADERS and its kin carry auth headers.
	for _, s := range []string{"_KEY", "APIKEY", "_TOKEN", "_KEY_ID", "_HEADERS", "_DSN", "_PAT"} {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	for _, c := range []string{"SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY", "NKEY", "CREDS", "API_KEY", "COOKIE"} {
		if strings.Contains(n, c) {
			return true
		}
	}
	return namesAuth(n)
}

// namesAuth: a word of the name says auth (AUTH, OAUTH, AUTHORIZATION,
// NPM_CONFIG__AUTH), not the author of a commit (GIT_AUTHOR_NAME).
func namesAuth(upper string) bool {
	for _, w := range strings.FieldsFunc(upper, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if strings.Contains(w, "AUTH") && w != "AUTHOR" && w != "AUTHORS" {
			return true
		}
	}
	return false
}
