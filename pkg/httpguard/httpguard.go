// Package httpguard is the access rule of Herald's own HTTP servers (the
// dashboard of `herald up`, `herald serve --metrics`): a request must name,
// in its Host header, a host the server answers for. A web page the user
// visits can make the browser send requests to a loopback server through
// DNS rebinding (its own name, resolved to 127.0.0.1), and then read the
// answers, since for the browser they come from the page's own origin; such
// a request carries the page's host name, and is refused here.
package httpguard

import (
	"net"
	"net/http"
	"strings"
)

// Hosts wraps h so that it answers only requests whose Host is a loopback
// name (localhost, 127.0.0.0/8, ::1; with any port) or one of allowed
// (host names or IP addresses, any case, without port); any other request
// gets 403 Forbidden, whatever its route.
func Hosts(h http.Handler, allowed ...string) http.Handler {
	set := map[string]bool{}
	for _, a := range allowed {
		if a = normalize(a); a != "" {
			set[a] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowedHost(r.Host, set) {
			http.Error(w, "this server answers requests for localhost only, and Host "+quote(r.Host)+
				" is not one; to reach it under another name add that name to dashboard.allowed_hosts (HERALD_DASHBOARD_ALLOWED_HOSTS)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Allowed reports whether a request with Host header host passes Hosts
// with allowed.
func Allowed(host string, allowed ...string) bool {
	set := map[string]bool{}
	for _, a := range allowed {
		set[normalize(a)] = true
	}
	return allowedHost(host, set)
}

func allowedHost(host string, allowed map[string]bool) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = normalize(host)
	if host == "" {
		return false
	}
	if host == "localhost" || allowed[host] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// normalize is a host name as compared: lower case, without brackets or a
// final dot.
func normalize(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(h, ".")
}

// quote keeps a hostile Host header short and printable in the answer.
func quote(h string) string {
	if len(h) > 64 {
		h = h[:64] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, `"`+h+`"`)
}

// ListenHosts are the names a server listening on addr is reached under
// beyond loopback, for Hosts: the host of addr when it names one (an IP
// address or a name), or, for an address on every interface (":9464",
// "0.0.0.0:9464", "[::]:9464"), the addresses of this machine's interfaces,
// which is what a client that is not a web page (a Prometheus scraper)
// puts in Host.
func ListenHosts(addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return []string{host}
	}
	addrs, _ := net.InterfaceAddrs()
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP.String())
		}
	}
	return out
}
