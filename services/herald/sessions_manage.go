package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/loop"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// parseAge reads a duration that may be given in days ("30d") as well as
// Go units ("12h", "90m"); "0" means no limit.
func parseAge(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a number of days (e.g. 30d)", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 30d, 12h)", s)
	}
	return d, nil
}

// ageName says an age in days when it is whole days ("30d").
func ageName(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// exportedEntry is one line of `herald sessions export --format jsonl`
// after the first (the session itself).
type exportedEntry struct {
	Type string `json:"type"` // message
	shownMessage
	Turn int32 `json:"turn"`
	TsMs int64 `json:"ts_unix_ms"`
}

func exportSession(ctx context.Context, js jetstream.JetStream, sid, format string, cio cliIO) error {
	if format != "jsonl" && format != "md" {
		return fmt.Errorf("--format %q: want jsonl or md", format)
	}
	st, entries, err := loop.SessionTranscript(ctx, js, sid)
	if errors.Is(err, loop.ErrNoSession) {
		return fmt.Errorf("no session %q", sid)
	}
	if err != nil {
		return err
	}
	if format == "md" {
		err = exportMarkdown(cio.out, st, entries)
	} else {
		err = exportJSONL(cio.out, st, entries)
	}
	if err == nil {
		fmt.Fprintf(cio.err, "exported session %s: %d messages as %s\n", sid, len(entries), format)
	}
	return err
}

func exportJSONL(w io.Writer, st *loop.State, entries []*heraldpb.TranscriptEntry) error {
	enc := json.NewEncoder(w)
	head := map[string]any{"type": "session", "session_id": st.SessionID, "model": st.Model, "tenant": st.Tenant,
		"status": st.Status, "turns": st.Turn, "cost_usd": st.SessionCostUSD, "parent_session_id": st.ParentSessionID}
	if err := enc.Encode(head); err != nil {
		return err
	}
	for _, e := range entries {
		if err := enc.Encode(exportedEntry{Type: "message", shownMessage: toShown(e), Turn: e.Turn, TsMs: e.TsUnixMs}); err != nil {
			return err
		}
	}
	return nil
}

func toShown(e *heraldpb.TranscriptEntry) shownMessage {
	m := e.Message
	sm := shownMessage{Index: e.Index, Role: m.Role, Content: m.Content, Reasoning: m.Reasoning, ToolCallID: m.ToolCallId, Name: m.Name}
	for _, tc := range m.ToolCalls {
		sm.ToolCalls = append(sm.ToolCalls, map[string]any{"id": tc.Id, "name": tc.Name, "arguments": tc.Arguments})
	}
	return sm
}

func exportMarkdown(w io.Writer, st *loop.State, entries []*heraldpb.TranscriptEntry) error {
	fmt.Fprintf(w, "# Session %s\n\nmodel %s · %d turns · $%.6f\n", st.SessionID, st.Model, st.Turn, st.SessionCostUSD)
	for _, e := range entries {
		m := e.Message
		switch {
		case m.Role == "system":
			continue
		case m.Role == "tool":
			fmt.Fprintf(w, "\n### Tool result: %s\n\n```\n%s\n```\n", m.Name, strings.TrimRight(m.Content, "\n"))
		default:
			fmt.Fprintf(w, "\n## %s\n", strings.ToUpper(m.Role[:1])+m.Role[1:])
			if m.Content != "" {
				fmt.Fprintf(w, "\n%s\n", m.Content)
			}
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(w, "\n**Tool call** `%s`\n\n```json\n%s\n```\n", tc.Name, tc.Arguments)
			}
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// removal is what deleting one session took away.
type removal struct {
	session string
	counts  map[string]int // what → how many messages
}

func (r removal) String() string {
	var parts []string
	for _, k := range []string{"transcript entries", "results", "events", "inputs and interrupts", "tool results", "model responses", "compressions", "tool-runner records", "checkpoints"} {
		if n := r.counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	parts = append(parts, "its state", "its search-index entries")
	return fmt.Sprintf("deleted session %s: %s (cost rows in ClickHouse are kept)", r.session, strings.Join(parts, ", "))
}

// deleteSession removes a session, and the subagent sessions it delegated
// to, from every stream that keeps it; ClickHouse's cost rows stay.
// checkpointDir, when set, is where this machine's tool runner keeps
// workspace snapshots; the session's are removed there too.
func deleteSession(ctx context.Context, js jetstream.JetStream, sid, checkpointDir string) ([]removal, error) {
	st, err := loop.LoadSession(ctx, js, sid)
	if errors.Is(err, loop.ErrNoSession) {
		return nil, fmt.Errorf("no session %q (herald sessions list shows them)", sid)
	}
	if err != nil {
		return nil, err
	}
	if st.Status != "" && st.Status != "idle" {
		return nil, fmt.Errorf("session %s is running a turn (%s): interrupt it first, then delete it", sid, st.Status)
	}
	all, err := loop.ListSessions(ctx, js)
	if err != nil {
		return nil, err
	}
	var out []removal
	for _, child := range all {
		if child.ParentSessionID == sid {
			r, err := purgeSession(ctx, js, child, checkpointDir)
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	r, err := purgeSession(ctx, js, st, checkpointDir)
	if err != nil {
		return out, err
	}
	return append(out, r), nil
}

func purgeSession(ctx context.Context, js jetstream.JetStream, st *loop.State, checkpointDir string) (removal, error) {
	sid := st.SessionID
	logs := []string{sid}
	for _, l := range append(slices.Clone(st.Logs), st.LogSID) {
		if l != "" && !slices.Contains(logs, l) {
			logs = append(logs, l)
		}
	}
	r := removal{session: sid, counts: map[string]int{}}
	type target struct{ stream, subject, what string }
	var targets []target
	for _, l := range logs {
		targets = append(targets, target{bus.StreamSessions, bus.SessionLog(l), "transcript entries"})
	}
	tok := bus.Token(sid)
	targets = append(targets,
		target{bus.StreamSessions, bus.SessionResult(sid), "results"},
		target{bus.StreamEvents, bus.SessionEvents(sid), "events"},
		target{bus.StreamControl, bus.SessionInput(sid), "inputs and interrupts"},
		target{bus.StreamControl, bus.SessionInterrupt(sid), "inputs and interrupts"},
		target{bus.StreamToolResults, "herald.tool.result." + sid + ".>", "tool results"},
		target{bus.StreamLLMResponses, "herald.llm.response.*." + sid, "model responses"},
		target{bus.StreamCompressResults, bus.CompressResult(sid), "compressions"},
		target{"KV_" + bus.BucketToolRunner, "$KV." + bus.BucketToolRunner + ".*." + tok, "tool-runner records"},
		target{"KV_" + bus.BucketToolRunner, "$KV." + bus.BucketToolRunner + ".*." + tok + ".>", "tool-runner records"},
	)
	for _, t := range targets {
		n, err := purgeSubject(ctx, js, t.stream, t.subject)
		if err != nil {
			return r, fmt.Errorf("delete %s of %s: %w", t.what, sid, err)
		}
		r.counts[t.what] += n
	}
	if checkpointDir != "" {
		dir := filepath.Join(checkpointDir, tok)
		if snaps, err := os.ReadDir(dir); err == nil {
			if err := os.RemoveAll(dir); err != nil {
				return r, fmt.Errorf("delete checkpoints of %s: %w", sid, err)
			}
			r.counts["checkpoints"] = len(snaps)
		}
	}
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		return r, err
	}
	if err := kv.Purge(ctx, sid); err != nil {
		return r, fmt.Errorf("delete state of %s: %w", sid, err)
	}
	// The tombstones tell every session-search index, running or restarted
	// later from its saved copy, to forget the session.
	for _, l := range logs {
		data, _ := gproto.Marshal(&heraldpb.TranscriptEntry{SessionId: l, Index: -1, Deleted: true, TsUnixMs: time.Now().UnixMilli()})
		if _, err := js.Publish(ctx, bus.SessionLog(l), data); err != nil {
			return r, fmt.Errorf("forget %s in the search index: %w", l, err)
		}
	}
	return r, nil
}

// purgeSubject removes every message of stream on subject, and the claims
// (large payloads kept in object stores) they point to; it returns how many
// messages went. A stream that does not exist holds nothing.
func purgeSubject(ctx context.Context, js jetstream.JetStream, stream, subject string) (int, error) {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for seq := uint64(1); ; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return n, err
		}
		seq = raw.Sequence + 1
		n++
		if name := raw.Header.Get(bus.HeaderClaim); name != "" {
			if obs, err := js.ObjectStore(ctx, raw.Header.Get(bus.HeaderClaimStore)); err == nil {
				_ = obs.Delete(ctx, name)
			}
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, s.Purge(ctx, jetstream.WithPurgeSubject(subject))
}

// pruneSessions deletes the idle top-level sessions whose last turn started
// before the cutoff.
func pruneSessions(ctx context.Context, js jetstream.JetStream, olderThan time.Duration, dryRun bool, checkpointDir string, cio cliIO) error {
	states, err := loop.ListSessions(ctx, js)
	if err != nil {
		return err
	}
	cutoff := time.Now().Add(-olderThan).UnixMilli()
	deleted := 0
	for _, st := range states {
		if st.ParentSessionID != "" || st.TurnStartedMs >= cutoff || st.Status != "" && st.Status != "idle" {
			continue
		}
		age := time.Since(time.UnixMilli(st.TurnStartedMs)).Round(time.Hour)
		if dryRun {
			fmt.Fprintf(cio.out, "would delete session %s (last turn %s ago)\n", st.SessionID, ageName(age.Round(24*time.Hour)))
			deleted++
			continue
		}
		rs, err := deleteSession(ctx, js, st.SessionID, checkpointDir)
		for _, r := range rs {
			fmt.Fprintln(cio.out, r)
		}
		if err != nil {
			return err
		}
		deleted++
	}
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	fmt.Fprintf(cio.out, "%s %d sessions whose last turn is older than %s\n", verb, deleted, ageName(olderThan))
	return nil
}
