package config

// Dashboard is who the dashboard of `herald up` (and its /metrics) and
// `herald serve --metrics` answer: requests whose Host header is a
// loopback name (localhost, 127.0.0.0/8, [::1], any port) or one of
// AllowedHosts; any other gets 403, so a web page cannot read them through
// DNS rebinding.
type Dashboard struct {
	// AllowedHosts are the other names (or addresses) the dashboard is
	// reached under, without port: dashboard.allowed_hosts, or
	// HERALD_DASHBOARD_ALLOWED_HOSTS (comma-separated).
	AllowedHosts []string `yaml:"allowed_hosts"`
}
