package accounting

import "net/http"

// Handle mounts h on the dashboard under pattern, behind the dashboard's
// access rule (the herald binary mounts /metrics this way).
func (d *Dashboard) Handle(pattern string, h http.Handler) { d.mux.Handle(pattern, h) }
