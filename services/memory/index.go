package memory

import (
	"encoding/gob"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// SubagentMarker in a session's system message hides the session (a
// delegated child's) from session_search. The loop's note to a child
// ("You are a subagent ...") is recognised as well.
const SubagentMarker = "[subagent]"

const subagentNote = "You are a subagent"

// Limits that keep the index small on tens of thousands of sessions.
const (
	maxIndexedChars = 32 << 10 // per message, for terms
	maxStoredChars  = 1000     // per message, kept for windows and phrases
	maxStoredTool   = 300      // per tool output, kept for windows
	minTermLen      = 2
	maxTermLen      = 40
)

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Posting is one message (by document number) containing a term.
type Posting struct {
	Doc uint32
	TF  uint16
}

// DocRef locates document number n (one message) in its session.
type DocRef struct {
	Session uint32
	Msg     int32
	Terms   int32
}

// StoredMessage is what the index keeps of one transcript message.
type StoredMessage struct {
	Present bool
	Role    string
	Text    string
}

// SessionDoc is one indexed transcript.
type SessionDoc struct {
	ID      string
	Tenant  string
	Hidden  bool
	Updated int64
	Msgs    []StoredMessage
}

// Index is a BM25 full-text index over transcripts, one document per
// message. It is safe for concurrent use.
type Index struct {
	mu       sync.RWMutex
	Sessions []*SessionDoc
	ByID     map[string]uint32
	Postings map[string][]Posting
	Docs     []DocRef
	TermSum  int64
	// LastSeq is the SESSIONS stream sequence of the last entry applied.
	LastSeq uint64
	// StreamCreated identifies the stream the sequences belong to: a saved
	// index of a since recreated stream is discarded.
	StreamCreated time.Time
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{ByID: map[string]uint32{}, Postings: map[string][]Posting{}}
}

// maxTranscriptIndex bounds the positions the index accepts: a bogus entry
// claiming position 2^31 would otherwise make it allocate tens of gigabytes.
const maxTranscriptIndex = 1 << 20

// Add indexes one transcript entry stored at stream sequence seq. Repeated
// (session, index) pairs are ignored, as the transcript contract says.
func (ix *Index) Add(e *heraldpb.TranscriptEntry, seq uint64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if seq > ix.LastSeq {
		ix.LastSeq = seq
	}
	if e.GetDeleted() {
		ix.forget(e.SessionId)
		return
	}
	m := e.GetMessage()
	if m == nil || m.Scaffolding || e.SessionId == "" || e.Index < 0 || e.Index > maxTranscriptIndex {
		return
	}
	ord, doc := ix.session(e.SessionId)
	for int(e.Index) >= len(doc.Msgs) {
		doc.Msgs = append(doc.Msgs, StoredMessage{})
	}
	if doc.Msgs[e.Index].Present {
		return
	}
	if doc.Tenant == "" {
		doc.Tenant = e.Tenant
	}
	doc.Updated = max(doc.Updated, e.TsUnixMs)
	if m.Role == "system" {
		doc.Msgs[e.Index] = StoredMessage{Present: true, Role: m.Role}
		doc.Hidden = doc.Hidden || strings.Contains(m.Content, SubagentMarker) || strings.Contains(m.Content, subagentNote)
		return
	}
	text := messageText(m)
	counts := termCounts(text)
	docNo := uint32(len(ix.Docs))
	terms := int32(0)
	for t, n := range counts {
		posts, known := ix.Postings[t]
		if !known {
			// t may be a slice of the message; a copy keeps the message collectable.
			t = strings.Clone(t)
		}
		ix.Postings[t] = append(posts, Posting{Doc: docNo, TF: uint16(min(n, math.MaxUint16))})
		terms += int32(n)
	}
	limit := maxStoredChars
	if m.Role == "tool" {
		limit = maxStoredTool
	}
	doc.Msgs[e.Index] = StoredMessage{Present: true, Role: m.Role, Text: strings.Clone(truncate(text, limit))}
	ix.Docs = append(ix.Docs, DocRef{Session: ord, Msg: e.Index, Terms: terms})
	ix.TermSum += int64(terms)
}

func (ix *Index) session(id string) (uint32, *SessionDoc) {
	if ord, ok := ix.ByID[id]; ok {
		return ord, ix.Sessions[ord]
	}
	ord := uint32(len(ix.Sessions))
	doc := &SessionDoc{ID: id}
	ix.Sessions = append(ix.Sessions, doc)
	ix.ByID[id] = ord
	return ord, doc
}

// messageText is the searchable text of a message: its content, plus the
// tool calls an assistant made (so "ran pytest" finds the call).
func messageText(m *heraldpb.ChatMessage) string {
	if len(m.ToolCalls) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		fmt.Fprintf(&b, "\n[%s %s]", c.Name, c.Arguments)
	}
	return b.String()
}

// tokenize splits text into lower-case words of letters and digits.
func tokenize(text string, fn func(string)) {
	if len(text) > maxIndexedChars {
		text = text[:maxIndexedChars]
	}
	start := -1
	emit := func(end int) {
		if start >= 0 {
			w := strings.ToLower(text[start:end])
			if n := len(w); n >= minTermLen && n <= maxTermLen && !stopwords[w] {
				fn(w)
			}
		}
		start = -1
	}
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		emit(i)
	}
	emit(len(text))
}

func termCounts(text string) map[string]int {
	counts := map[string]int{}
	tokenize(text, func(t string) { counts[t]++ })
	return counts
}

var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("a an and are as at be but by for from has have he her his i if in into is it its me my no not of on or our she so that the their them then there these they this to was we were what when which who will with you your") {
		m[w] = true
	}
	return m
}()

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Save writes the index to path atomically (a temporary file renamed over it).
func (ix *Index) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("save index: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".session-index-*")
	if err != nil {
		return fmt.Errorf("save index: %w", err)
	}
	defer os.Remove(tmp.Name())
	ix.mu.RLock()
	err = gob.NewEncoder(tmp).Encode(ix)
	ix.mu.RUnlock()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save index: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// LoadIndex reads an index saved by Save.
func LoadIndex(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ix := NewIndex()
	if err := gob.NewDecoder(f).Decode(ix); err != nil {
		return nil, fmt.Errorf("load index %s: %w", path, err)
	}
	if ix.ByID == nil {
		ix.ByID = map[string]uint32{}
	}
	if ix.Postings == nil {
		ix.Postings = map[string][]Posting{}
	}
	return ix, nil
}

// replace swaps in other's contents (used when a saved index is loaded).
func (ix *Index) replace(other *Index) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.Sessions, ix.ByID, ix.Postings = other.Sessions, other.ByID, other.Postings
	ix.Docs, ix.TermSum, ix.LastSeq = other.Docs, other.TermSum, other.LastSeq
	ix.StreamCreated = other.StreamCreated
}

// belongsTo reports whether the index was built from the stream created at
// created (true for a fresh index), and claims it for that stream.
func (ix *Index) belongsTo(created time.Time, lastSeq uint64) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	fresh := ix.LastSeq == 0 && len(ix.Sessions) == 0
	ok := fresh || (ix.StreamCreated.Equal(created) && ix.LastSeq <= lastSeq)
	ix.StreamCreated = created
	return ok
}

func (ix *Index) lastSeq() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.LastSeq
}

// sortedSessions returns visible session ordinals, most recently updated first.
func (ix *Index) recent(scope Scope, limit int) []uint32 {
	var ords []uint32
	for i, d := range ix.Sessions {
		if scope.shows(d) {
			ords = append(ords, uint32(i))
		}
	}
	sort.Slice(ords, func(a, b int) bool { return ix.Sessions[ords[a]].Updated > ix.Sessions[ords[b]].Updated })
	if len(ords) > limit {
		ords = ords[:limit]
	}
	return ords
}
