package compressor

import "regexp"

// secretPatterns match credentials that must not survive into a summary
// (which is replayed to the model for the rest of the session).
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_\-]{16,}`),
	regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_\-]{16,}`),
	regexp.MustCompile(`\b(ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}`),
	regexp.MustCompile(`\bxox[abpors]-[A-Za-z0-9\-]{10,}`),
	regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}\b`),
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._\-+/=]{16,}`),
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
	regexp.MustCompile(`\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:[^\s@/]+@`),
}

// assignmentSecret matches `password=...`, `API_KEY: ...` and the like,
// keeping the name so the summary still says a secret was set.
var assignmentSecret = regexp.MustCompile(`(?i)\b([A-Z0-9_\-]*(?:password|passwd|secret|token|api[_\-]?key|access[_\-]?key)[A-Z0-9_\-]*)(["']?\s*[:=]\s*["']?)([^\s"',;]{6,})`)

const redacted = "[REDACTED]"

// redact removes credentials from text.
func redact(text string) string {
	for _, re := range secretPatterns {
		text = re.ReplaceAllString(text, redacted)
	}
	return assignmentSecret.ReplaceAllString(text, "${1}${2}"+redacted)
}
