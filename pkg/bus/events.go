package bus

import (
	"encoding/json"
	"time"

	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
)

// PublishEvent sends a progress event on the session's events subject. The
// EVENTS stream captures it, so late subscribers can replay; progress is
// best-effort by design, so the publish is not awaited. The event of a
// tenant-bound session is also published on the tenant's subject.
func PublishEvent(nc *nats.Conn, ev proto.Event) error {
	if ev.TS == "" {
		ev.TS = time.Now().UTC().Format(time.RFC3339Nano)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := nc.Publish(SessionEvents(ev.SessionID), data); err != nil || ev.BoundTenant == "" {
		return err
	}
	return nc.Publish(TenantSessionEvents(ev.BoundTenant, ev.SessionID), data)
}
