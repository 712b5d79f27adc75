package toolrunner

import (
	"os"
	"strings"
)

// scrubbedEnv is the runner's environment without anything that looks like a
// credential or Herald's own settings: a tool (or a prompt-injected model)
// must not be able to read the keys the runtime holds.
func scrubbedEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !isSecretName(name) {
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
	for _, s := range []string{"_API_KEY", "APIKEY", "_TOKEN", "_KEY_ID", "_ACCESS_KEY"} {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	for _, c := range []string{"SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY", "NKEY", "CREDS"} {
		if strings.Contains(n, c) {
			return true
		}
	}
	return false
}
