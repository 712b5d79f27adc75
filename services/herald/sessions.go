package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/loop"
	"github.com/heraldrun/herald/services/memory"
	"github.com/heraldrun/herald/services/toolrunner"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func cmdSessions(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("sessions", cio.err)
	var c common
	c.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 10, "search: how many sessions")
	format := fs.String("format", "jsonl", "export: jsonl or md")
	olderThan := fs.String("older-than", "", "prune: delete sessions whose last turn is older than this (e.g. 30d)")
	dryRun := fs.Bool("dry-run", false, "prune: only say what would be deleted")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) == 0 || (pos[0] != "list" && pos[0] != "prune" && len(pos) != 2) {
		fmt.Fprintln(cio.err, "usage: herald sessions list | show ID | search QUERY | export ID [--format jsonl|md] | delete ID | prune --older-than 30d")
		return exitUsage
	}
	age, err := parseAge(*olderThan)
	if err != nil || pos[0] == "prune" && age <= 0 {
		fmt.Fprintln(cio.err, "herald sessions prune: give --older-than AGE, e.g. --older-than 30d")
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald sessions:", err)
		return exitUsage
	}
	js, closeFn, err := openBus(cfg)
	if err != nil {
		fmt.Fprintln(cio.err, "herald sessions:", err)
		return exitFail
	}
	defer closeFn()
	switch pos[0] {
	case "list":
		err = listSessions(ctx, js, cio, *jsonOut)
	case "show":
		err = showSession(ctx, js, pos[1], cio, *jsonOut)
	case "search":
		err = searchSessions(ctx, js, pos[1], *limit, cio, *jsonOut)
	case "export":
		err = exportSession(ctx, js, pos[1], *format, cio)
	case "delete":
		var rs []removal
		rs, err = deleteSession(ctx, js, pos[1], toolrunner.ConfigFrom(cfg).CheckpointDir)
		for _, r := range rs {
			fmt.Fprintln(cio.out, r)
		}
	case "prune":
		err = pruneSessions(ctx, js, age, *dryRun, toolrunner.ConfigFrom(cfg).CheckpointDir, cio)
	default:
		fmt.Fprintf(cio.err, "herald sessions: unknown subcommand %q\n", pos[0])
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(cio.err, "herald sessions:", err)
		return exitFail
	}
	return exitOK
}

// openBus connects to HERALD_NATS_URL, or opens the data dir's store with
// an in-process server when no NATS is running.
func openBus(cfg config.Config) (jetstream.JetStream, func(), error) {
	if nc, err := nats.Connect(cfg.NATSURL, nats.Timeout(time.Second), app.InboxOption(cfg)); err == nil {
		js, err := jetstream.New(nc)
		return js, nc.Close, err
	}
	store := filepath.Join(cfg.DataDir, "nats")
	if _, err := os.Stat(store); err != nil {
		return nil, nil, fmt.Errorf("no NATS at %s and no local data in %s", app.RedactURL(cfg.NATSURL), store)
	}
	// The folder's store has one owner: attach to it when it listens, else
	// say who holds it.
	lock, err := lockDataDir(cfg.DataDir, lockHolder{Workspace: cfg.WorkspaceRoot()})
	if busy := (*errDataDirBusy)(nil); errors.As(err, &busy) && busy.holder.NATS != "" {
		nc, cerr := nats.Connect(busy.holder.NATS, nats.Timeout(time.Second), app.InboxOption(cfg))
		if cerr != nil {
			return nil, nil, fmt.Errorf("%w; its NATS at %s does not answer: %v", err, busy.holder.NATS, cerr)
		}
		js, err := jetstream.New(nc)
		return js, nc.Close, err
	}
	if err != nil {
		return nil, nil, err
	}
	srv, err := embedded.Start(embedded.Options{StoreDir: store, Log: zerolog.Nop()})
	if err != nil {
		lock.release()
		return nil, nil, err
	}
	nc, err := srv.Connect("herald-sessions")
	if err != nil {
		srv.Shutdown()
		lock.release()
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	return js, func() { nc.Close(); srv.Shutdown(); lock.release() }, err
}

func listSessions(ctx context.Context, js jetstream.JetStream, cio cliIO, jsonOut bool) error {
	states, err := loop.ListSessions(ctx, js)
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(cio.out).Encode(states)
	}
	tw := tabwriter.NewWriter(cio.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATUS\tOUTCOME\tTURNS\tMODEL\tTENANT\tCOST USD\tPARENT\tSTARTED\tTITLE")
	for _, s := range states {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.SessionID, s.Outcome(), orDash(s.LastExit), s.Turn, s.Model, s.Tenant,
			sessionCostCell(s.SessionCostUSD, s.SessionUnpriced), orDash(s.ParentSessionID),
			time.UnixMilli(s.TurnStartedMs).UTC().Format(time.DateTime), orDash(s.Title))
	}
	return tw.Flush()
}

type shownMessage struct {
	Index      int32            `json:"index"`
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	Reasoning  string           `json:"reasoning,omitempty"`
	ToolCalls  []map[string]any `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	Name       string           `json:"name,omitempty"`
}

func showSession(ctx context.Context, js jetstream.JetStream, sid string, cio cliIO, jsonOut bool) error {
	st, entries, err := loop.SessionTranscript(ctx, js, sid)
	if errors.Is(err, loop.ErrNoSession) {
		return fmt.Errorf("no session %q", sid)
	}
	if err != nil {
		return err
	}
	var msgs []shownMessage
	for _, e := range entries {
		m := e.Message
		sm := shownMessage{Index: e.Index, Role: m.Role, Content: m.Content, Reasoning: m.Reasoning, ToolCallID: m.ToolCallId, Name: m.Name}
		for _, tc := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, map[string]any{"id": tc.Id, "name": tc.Name, "arguments": tc.Arguments})
		}
		msgs = append(msgs, sm)
	}
	if jsonOut {
		return json.NewEncoder(cio.out).Encode(map[string]any{"session": st, "messages": msgs})
	}
	fmt.Fprintf(cio.out, "session %s · %s · %d turns · model %s · %s\n\n", st.SessionID, st.Status, st.Turn, st.Model, sessionCost(st.SessionCostUSD, st.SessionUnpriced))
	for _, m := range msgs {
		switch {
		case m.Role == "system":
			fmt.Fprintf(cio.out, "[system] %s\n\n", firstLine(m.Content))
		case len(m.ToolCalls) > 0:
			fmt.Fprintf(cio.out, "[assistant] %s\n", m.Content)
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(cio.out, "  → %s %s\n", tc["name"], tc["arguments"])
			}
			fmt.Fprintln(cio.out)
		case m.Role == "tool":
			fmt.Fprintf(cio.out, "[tool %s] %s\n\n", m.Name, shorten(m.Content, 300))
		default:
			fmt.Fprintf(cio.out, "[%s] %s\n\n", m.Role, m.Content)
		}
	}
	return nil
}

func searchSessions(ctx context.Context, js jetstream.JetStream, query string, limit int, cio cliIO, jsonOut bool) error {
	hits, err := memory.Search(ctx, js, query, limit)
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(cio.out).Encode(hits)
	}
	if len(hits) == 0 {
		fmt.Fprintln(cio.out, "no matching sessions")
	}
	for _, h := range hits {
		fmt.Fprintf(cio.out, "%s (score %.2f)\n", h.SessionID, h.Score)
		for _, m := range h.Window {
			fmt.Fprintf(cio.out, "  [%s] %s\n", m.Role, shorten(m.Text, 200))
		}
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sessionCostCell is a session's cost in a table: a lower bound (≥) or
// n/a once some of its calls had no price.
func sessionCostCell(usd float64, unpriced int) string {
	switch {
	case unpriced == 0:
		return fmt.Sprintf("%.6f", usd)
	case usd == 0:
		return "n/a"
	}
	return fmt.Sprintf("≥%.6f", usd)
}
