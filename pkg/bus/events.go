package bus

import (
	"encoding/json"
	"time"

	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
)

// PublishEvent sends a progress event on the session's events subject. The
// EVENTS stream captures it, so late subscribers can replay; progress is
// best-effort by design, so the publish is not awaited.
func PublishEvent(nc *nats.Conn, ev proto.Event) error {
	if ev.TS == "" {
		ev.TS = time.Now().UTC().Format(time.RFC3339Nano)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return nc.Publish(SessionEvents(ev.SessionID), data)
}
