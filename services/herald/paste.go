package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/peterh/liner"
)

// Bracketed paste: a terminal told so (pasteOn) wraps pasted text in
// pasteStart … pasteEnd. The line editor (liner) knows nothing of it and
// would take each pasted newline for Enter, one message a line; the chat
// reads the terminal itself and hands the editor a paste whose newlines and
// tabs are shown as ␤ and ␉, turned back when the line is sent.
const (
	pasteOn    = "\x1b[?2004h"
	pasteOff   = "\x1b[?2004l"
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"

	pastedNewline = '␤'
	pastedTab     = '␉'
)

// lineText turns a line read by the editor back into the message typed.
func lineText(line string) string {
	return strings.NewReplacer(string(pastedNewline), "\n", string(pastedTab), "\t").Replace(line)
}

// pasteFilter rewrites the terminal's bytes for the line editor: outside a
// paste they pass as they are; inside, CR/LF become ␤ and tabs ␉, and the
// bracket markers are dropped.
type pasteFilter struct {
	pasting bool
	held    []byte // the start of what may be a marker, waiting for more bytes
	skipLF  bool   // a pasted CR was just turned into ␤: its LF goes with it
}

func (f *pasteFilter) write(in []byte, out *bytes.Buffer) {
	data := append(f.held, in...)
	f.held = nil
	for len(data) > 0 {
		marker := pasteStart
		if f.pasting {
			marker = pasteEnd
		}
		if bytes.HasPrefix(data, []byte(marker)) {
			f.pasting = !f.pasting
			data = data[len(marker):]
			continue
		}
		if data[0] == 0x1b && bytes.HasPrefix([]byte(marker), data) {
			f.held = append([]byte(nil), data...) // a marker cut by the read
			return
		}
		f.one(data[0], out)
		data = data[1:]
	}
}

func (f *pasteFilter) one(c byte, out *bytes.Buffer) {
	skipLF := f.skipLF
	f.skipLF = false
	if !f.pasting {
		out.WriteByte(c)
		return
	}
	switch c {
	case '\n':
		if !skipLF {
			out.WriteRune(pastedNewline)
		}
	case '\r':
		out.WriteRune(pastedNewline)
		f.skipLF = true
	case '\t':
		out.WriteRune(pastedTab)
	default:
		out.WriteByte(c)
	}
}

// pasteInput stands between the terminal and the line editor.
type pasteInput struct {
	w       *os.File
	mu      sync.Mutex // one writer to the pipe: the terminal's copy and poke
	restore func()
}

// startPasteInput turns bracketed paste on and makes os.Stdin, which the
// line editor reads (it sets the terminal's mode on file descriptor 0, so
// that still works), the filtered copy of the terminal. It must run before
// liner.NewLiner. Piped input is left alone: it has no pastes.
func startPasteInput(screen io.Writer) *pasteInput {
	if _, err := liner.TerminalMode(); err != nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	term := os.Stdin
	os.Stdin = r
	p := &pasteInput{w: w, restore: func() { os.Stdin = term }}
	_, _ = io.WriteString(screen, pasteOn)
	go p.copy(term)
	return p
}

func (p *pasteInput) copy(term *os.File) {
	var f pasteFilter
	buf := make([]byte, 4096)
	var out bytes.Buffer
	for {
		n, err := term.Read(buf)
		out.Reset()
		f.write(buf[:n], &out)
		if out.Len() > 0 {
			p.mu.Lock()
			_, _ = p.w.Write(out.Bytes())
			p.mu.Unlock()
		}
		if err != nil {
			_ = p.w.Close()
			return
		}
	}
}

// poke sends the line editor a key as if typed: Ctrl-C ends a prompt the
// server no longer waits for.
func (p *pasteInput) poke(key byte) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.Write([]byte{key})
}

func (p *pasteInput) stop(screen io.Writer) {
	if p == nil {
		return
	}
	_, _ = io.WriteString(screen, pasteOff)
	p.restore()
}
