package toolrunner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
)

// Context files (AGENTS.md and the like) are read here, by the runner that
// owns the workspace, never by the loop: through os.Root, so a context file
// that is a symlink out of the workspace, a FIFO, a device or a pseudo-file
// is skipped and named, and at most proto.MaxContextFileBytes of a file is
// read from disk.

// serveContextFiles answers the loop's context-file requests for this
// runner's pool, one runner per request.
func (s *Service) serveContextFiles() (*nats.Subscription, error) {
	sub, err := s.deps.NC.QueueSubscribe(bus.ContextFiles(s.cfg.Pool), SpecsQueue, concurrently(func(m *nats.Msg) {
		var req proto.ContextFilesRequest
		var reply proto.ContextFilesReply
		if err := json.Unmarshal(m.Data, &req); err != nil {
			reply.Error = "unreadable request: " + err.Error()
		} else {
			reply = readContextFiles(s.cfg.WorkspaceRoot, req)
		}
		data, _ := json.Marshal(reply)
		if err := m.Respond(data); err != nil {
			s.log.Warn().Err(err).Str("session_id", req.SessionID).Msg("answering a context files request failed")
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("toolrunner: serve context files: %w", err)
	}
	return sub, nil
}

// maxAnswering bounds the context-file requests one runner answers at once.
const maxAnswering = 64

// concurrently answers each request in a goroutine of its own, up to
// maxAnswering at once: a subscription runs its handler one message at a
// time, so 1,000 sessions starting together waited in line for their files
// and the last ones waited past the loop's ContextFilesTimeout (2 s).
func concurrently(h nats.MsgHandler) nats.MsgHandler {
	slots := make(chan struct{}, maxAnswering)
	return func(m *nats.Msg) {
		slots <- struct{}{}
		go func() {
			defer func() { <-slots }()
			h(m)
		}()
	}
}

// readContextFiles reads the context files of a session's workspace. A
// workspace that does not exist yet has none.
func readContextFiles(root string, req proto.ContextFilesRequest) proto.ContextFilesReply {
	ws, err := openContextWorkspace(root, req.Tenant, req.Workspace)
	if errors.Is(err, fs.ErrNotExist) {
		return proto.ContextFilesReply{}
	}
	if err != nil {
		return proto.ContextFilesReply{Error: err.Error()}
	}
	defer func() { _ = ws.Close() }()
	var reply proto.ContextFilesReply
	for _, name := range proto.ContextFileNames {
		text, found, err := readContextFile(ws, name)
		switch {
		case err != nil:
			reply.Skipped = append(reply.Skipped, proto.SkippedContextFile{Name: name, Reason: err.Error()})
		case found:
			reply.Files = append(reply.Files, proto.ContextFile{Name: name, Text: text})
		}
	}
	return reply
}

// openContextWorkspace opens the session's folder under the runner's root,
// read-only and by the rules of tool calls (workspaceParts, workspace.enter:
// every folder on the way a real folder, opened as the one Lstat saw): a
// bound session's folder lies in tenants/<tenant>/, an unbound one never in
// tenants/. Nothing is created.
func openContextWorkspace(root, tenant, folder string) (*os.Root, error) {
	parts, err := workspaceParts(folder)
	if err != nil {
		return nil, err
	}
	inTenants := len(parts) > 0 && parts[0] == bus.TenantsFolder
	switch {
	case tenant == "" && inTenants:
		return nil, fmt.Errorf("workspace %q: %w: only a tenant's session works in %s/", folder, ErrOutsideWorkspace, bus.TenantsFolder)
	case tenant != "" && (!proto.IsToken(tenant) || len(parts) < 2 || !inTenants || parts[1] != tenant):
		return nil, fmt.Errorf("workspace %q: %w: not in the folder of tenant %q", folder, ErrOutsideWorkspace, tenant)
	}
	cur, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	for _, p := range parts {
		next, err := (workspace{}).enter(cur, p, false)
		_ = cur.Close()
		if err != nil {
			return nil, fmt.Errorf("workspace %q: %w", folder, err)
		}
		cur = next
	}
	return cur, nil
}

// readContextFile reads one context file of ws. found is false when there
// is none; err says why one that exists was skipped.
func readContextFile(ws *os.Root, name string) (text string, found bool, err error) {
	seen, err := ws.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", name, err)
	}
	// A FIFO or device is never opened (opening either can block or act);
	// a symlink is followed only inside the workspace (os.Root refuses the
	// rest), without blocking, and what it leads to is checked again.
	if t := seen.Mode().Type(); t != 0 && t != fs.ModeSymlink {
		return "", false, fmt.Errorf("%s is not a regular file (%s)", name, t)
	}
	f, err := ws.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", false, fmt.Errorf("%s could not be opened inside the workspace: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return "", false, fmt.Errorf("%s does not lead to a regular file (%s)", name, info.Mode().Type())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return "", false, fmt.Errorf("%s has %d hard links: it may be a file from outside the workspace", name, st.Nlink)
	}
	text, err = readCapped(f, name, info.Size())
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", name, err)
	}
	return text, true, nil
}

// readCapped reads a file of size bytes, never more than
// proto.MaxContextFileBytes of it: a longer file keeps its head (70%) and
// tail (20%) around a note saying what was left out, since the end of an
// AGENTS.md often holds the rules that matter most. Only the size the file
// reports is read, so a pseudo-file reporting none yields nothing.
func readCapped(f io.ReaderAt, name string, size int64) (string, error) {
	const limit = proto.MaxContextFileBytes
	if size <= limit {
		return readSpan(f, 0, size)
	}
	head, err := readSpan(f, 0, limit*7/10)
	if err != nil {
		return "", err
	}
	tail, err := readSpan(f, size-limit*2/10, limit*2/10)
	if err != nil {
		return "", err
	}
	head, tail = strings.ToValidUTF8(head, ""), strings.ToValidUTF8(tail, "")
	return fmt.Sprintf("%s\n[... %s truncated: kept the first %d and last %d of its %d characters; read the file for the rest.]\n%s",
		head, name, len(head), len(tail), size, tail), nil
}

func readSpan(f io.ReaderAt, off, n int64) (string, error) {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return string(buf[:got]), nil
}
