package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Search limits.
const (
	DefaultSearchLimit = 3
	MaxSearchLimit     = 10
	// windowRadius is how many messages either side of a hit are returned.
	windowRadius = 2
	windowChars  = 400
	// maxQueryTerms bounds the work of one search (and its per-message counters).
	maxQueryTerms = 32
)

// Hit is one session found by a search, best first.
type Hit struct {
	SessionID string          `json:"session_id"`
	Score     float64         `json:"score"`
	Updated   string          `json:"updated,omitempty"`
	Match     int32           `json:"match_index"`
	Window    []WindowMessage `json:"messages"`
}

// WindowMessage is one transcript message around a hit.
type WindowMessage struct {
	Index int32  `json:"index"`
	Role  string `json:"role"`
	Text  string `json:"text"`
}

// Search ranks sessions for query (BM25 over messages; a session scores by
// its best message, which is boosted when it holds the whole query as a
// phrase) and returns the top limit with a window around each best message.
// An empty query lists the most recent sessions. Hidden (subagent) sessions
// and the session named by exclude never appear.
func (ix *Index) Search(query string, limit int, exclude string) []Hit {
	return ix.SearchIn(Scope{Exclude: exclude}, query, limit)
}

// Scope is which sessions a search may show.
type Scope struct {
	// Exclude is the searching session itself.
	Exclude string
	// Tenant, when set, limits the search to that tenant's sessions;
	// Untagged adds sessions indexed before transcripts named their tenant.
	Tenant   string
	Untagged bool
}

func (sc Scope) shows(d *SessionDoc) bool {
	if d.Hidden || d.ID == sc.Exclude {
		return false
	}
	return sc.Tenant == "" || d.Tenant == sc.Tenant || (d.Tenant == "" && sc.Untagged)
}

// SearchIn is Search over the sessions of scope.
func (ix *Index) SearchIn(scope Scope, query string, limit int) []Hit {
	limit = clampLimit(limit)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	terms := uniqueTerms(query)
	if len(terms) == 0 {
		var hits []Hit
		for _, ord := range ix.recent(scope, limit) {
			hits = append(hits, ix.hit(ord, firstUser(ix.Sessions[ord]), 0))
		}
		return hits
	}
	best := map[uint32]docScore{}
	phrase := strings.ToLower(strings.Join(strings.Fields(query), " "))
	for _, c := range ix.topDocs(terms, scope) {
		ref := ix.Docs[c.doc]
		sc := c.score
		if len(terms) > 1 && containsFold(ix.Sessions[ref.Session].Msgs[ref.Msg].Text, phrase) {
			sc *= 2
		}
		if cur, ok := best[ref.Session]; !ok || sc > cur.score {
			best[ref.Session] = docScore{msg: ref.Msg, score: sc}
		}
	}
	ranked := make([]uint32, 0, len(best))
	for ord := range best {
		ranked = append(ranked, ord)
	}
	sort.Slice(ranked, func(a, b int) bool {
		x, y := best[ranked[a]], best[ranked[b]]
		if x.score != y.score {
			return x.score > y.score
		}
		return ix.Sessions[ranked[a]].Updated > ix.Sessions[ranked[b]].Updated
	})
	if len(ranked) > limit {
		ranked = ranked[:limit]
	}
	hits := make([]Hit, 0, len(ranked))
	for _, ord := range ranked {
		hits = append(hits, ix.hit(ord, best[ord].msg, best[ord].score))
	}
	return hits
}

type docScore struct {
	msg   int32
	score float64
}

// candidates is how many best-scoring messages are considered for the
// phrase boost and grouped into sessions; enough for MaxSearchLimit sessions.
const candidates = 256

type candidate struct {
	doc   uint32
	score float64
}

// topDocs scores messages by BM25 over terms, weighted by the share of
// terms each contains, and returns the best candidates of visible sessions.
func (ix *Index) topDocs(terms []string, scope Scope) []candidate {
	n := float64(max(len(ix.Docs), 1))
	avg := float64(ix.TermSum) / n
	if avg == 0 {
		avg = 1
	}
	acc := scratchPool.get(len(ix.Docs))
	defer scratchPool.put(acc)
	for _, t := range terms {
		posts := ix.Postings[t]
		df := float64(len(posts))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range posts {
			dl := float64(ix.Docs[p.Doc].Terms)
			tf := float64(p.TF)
			if acc.matched[p.Doc] == 0 {
				acc.touched = append(acc.touched, p.Doc)
			}
			acc.score[p.Doc] += float32(idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avg)))
			acc.matched[p.Doc]++
		}
	}
	top := &candidateHeap{}
	for _, d := range acc.touched {
		doc := ix.Sessions[ix.Docs[d].Session]
		if !scope.shows(doc) {
			continue
		}
		sc := float64(acc.score[d]) * float64(acc.matched[d]) / float64(len(terms))
		top.offer(candidate{doc: d, score: sc})
	}
	return top.items
}

func (ix *Index) hit(ord uint32, msg int32, score float64) Hit {
	doc := ix.Sessions[ord]
	h := Hit{SessionID: doc.ID, Score: math.Round(score*1000) / 1000, Match: msg}
	if doc.Updated > 0 {
		h.Updated = time.UnixMilli(doc.Updated).UTC().Format(time.RFC3339)
	}
	for i := max(0, int(msg)-windowRadius); i <= int(msg)+windowRadius && i < len(doc.Msgs); i++ {
		m := doc.Msgs[i]
		if !m.Present || m.Role == "system" {
			continue
		}
		h.Window = append(h.Window, WindowMessage{Index: int32(i), Role: m.Role, Text: truncate(m.Text, windowChars)})
	}
	return h
}

func firstUser(doc *SessionDoc) int32 {
	for i, m := range doc.Msgs {
		if m.Present && m.Role == "user" {
			return int32(i)
		}
	}
	return 0
}

func uniqueTerms(query string) []string {
	seen := map[string]bool{}
	var out []string
	tokenize(query, func(t string) {
		if !seen[t] && len(out) < maxQueryTerms {
			seen[t] = true
			out = append(out, t)
		}
	})
	return out
}

// containsFold reports whether text contains the lower-case phrase, ignoring case.
func containsFold(text, phrase string) bool {
	return strings.Contains(strings.ToLower(text), phrase)
}

func clampLimit(limit int) int {
	if limit <= 0 {
		return DefaultSearchLimit
	}
	return min(limit, MaxSearchLimit)
}

// searchArgs are session_search's arguments.
type searchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// searchOutcome is the JSON the model sees as session_search's result.
type searchOutcome struct {
	Success bool   `json:"success"`
	Query   string `json:"query,omitempty"`
	Results []Hit  `json:"results"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func decodeSearchArgs(raw string) (searchArgs, error) {
	var a searchArgs
	if strings.TrimSpace(raw) == "" {
		return a, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("%w: arguments must be a JSON object {query?: string, limit?: integer}: %v", ErrInvalidArguments, err)
	}
	if a.Limit < 0 {
		return a, fmt.Errorf("%w: limit must not be negative", ErrInvalidArguments)
	}
	return a, nil
}
