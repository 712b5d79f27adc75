package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// keepAlive is how often an idle event stream sends a comment, so proxies
// and clients see the connection is alive.
const keepAlive = 15 * time.Second

// sessionEvent is one event of a run's session as stored in EVENTS.
type sessionEvent struct {
	Seq  uint64 // the EVENTS stream sequence: the SSE id
	Type string
	Data []byte
	Ev   proto.Event
}

// eventReader reads a run's events in stream order from after a sequence:
// an ordered consumer over the session's events subject, so a reader that
// starts again from the last sequence it handed out sees every later event
// exactly once.
type eventReader struct {
	s     *Service
	runID string
	cons  jetstream.Consumer
	// msgs pulls the events in batches (a pull per event cost a round trip
	// each, most of a streamed turn's time: docs/BENCHMARKS.md).
	msgs jetstream.MessagesContext
}

// close stops the reader's pulls and deletes its consumer (left alone, it
// would outlive the request by its inactivity threshold, and a busy api
// would pile up thousands of them on EVENTS).
func (er *eventReader) close() {
	if er.msgs != nil {
		er.msgs.Stop()
	}
	info := er.cons.CachedInfo()
	if info == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = er.s.deps.JS.DeleteConsumer(ctx, bus.StreamEvents, info.Name)
	}()
}

func (s *Service) readEvents(ctx context.Context, rn *run, after uint64) (*eventReader, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SessionEvents(rn.SessionID)},
		InactiveThreshold: time.Minute}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := s.deps.JS.OrderedConsumer(ctx, bus.StreamEvents, cfg)
	if err != nil {
		return nil, errors.Join(errUnavailable, err)
	}
	msgs, err := cons.Messages(jetstream.PullMaxMessages(64))
	if err != nil {
		return nil, errors.Join(errUnavailable, err)
	}
	return &eventReader{s: s, runID: rn.ID, cons: cons, msgs: msgs}, nil
}

// next returns the run's next event; ok is false when wait passed with none.
func (er *eventReader) next(ctx context.Context, wait time.Duration) (sessionEvent, bool, error) {
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return sessionEvent{}, false, nil
		}
		wait, cancel := context.WithTimeout(ctx, left)
		msg, err := er.msgs.Next(jetstream.NextContext(wait))
		cancel()
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			if ctx.Err() != nil {
				return sessionEvent{}, false, ctx.Err()
			}
			continue
		}
		if err != nil {
			return sessionEvent{}, false, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return sessionEvent{}, false, err
		}
		data, err := bus.Resolve(ctx, er.s.deps.JS, msg.Subject(), msg.Headers(), msg.Data())
		if err != nil {
			return sessionEvent{}, false, err
		}
		var ev proto.Event
		if json.Unmarshal(data, &ev) != nil || ev.TaskID != er.runID {
			continue // another turn's event, or not an event
		}
		return sessionEvent{Seq: meta.Sequence.Stream, Type: ev.Type, Data: data, Ev: ev}, true, nil
	}
}

// isEnd says whether ev is the run's last event.
func (ev sessionEvent) isEnd() bool { return ev.Type == proto.EventResult }

// streamRunEvents serves GET /v1/runs/{id}/events: the run's events as SSE,
// each with its stream sequence as id, from after Last-Event-ID, ending
// after the result event.
func (s *Service) streamRunEvents(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	rn, err := s.runs.get(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	after, err := lastEventID(r)
	if err != nil {
		return err
	}
	reader, err := s.readEvents(ctx, rn, after)
	if err != nil {
		return err
	}
	defer reader.close()
	sse := startSSE(w)
	for {
		ev, ok, err := reader.next(ctx, keepAlive)
		if err != nil {
			return nil // the client went away, or the bus did: the client resumes
		}
		if !ok {
			sse.comment("keep-alive")
			continue
		}
		sse.event(strconv.FormatUint(ev.Seq, 10), ev.Type, ev.Data)
		if ev.isEnd() {
			return nil
		}
	}
}

// lastEventID reads the sequence a reconnecting client saw last (the
// Last-Event-ID header, or ?after= for clients that cannot set headers).
func lastEventID(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil || n == math.MaxUint64 { // no event has the last id: the one after it would wrap to the first
		return 0, invalid("invalid_last_event_id", "Last-Event-ID must be the id of an event this stream sent (a number), got %q", v)
	}
	return n, nil
}

// sseWriter writes Server-Sent Events, flushing each.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	s := &sseWriter{w: w, f: f}
	s.flush()
	return s
}

func (s *sseWriter) event(id, name string, data []byte) {
	if id != "" {
		fmt.Fprintf(s.w, "id: %s\n", id)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	s.flush()
}

// data writes an unnamed event (the Chat Completions stream's form).
func (s *sseWriter) data(data []byte) { s.event("", "", data) }

func (s *sseWriter) comment(text string) {
	fmt.Fprintf(s.w, ": %s\n\n", text)
	s.flush()
}

func (s *sseWriter) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}
