package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

const (
	benchSessions = 10_000
	benchMessages = 20
)

// benchIndex fills an index with benchSessions synthetic sessions of
// benchMessages messages each (words drawn from a Zipf-distributed
// vocabulary of 20,000, like real text), plus one session holding a phrase.
func benchIndex(tb testing.TB) *Index {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 2, 19_999)
	vocab := make([]string, 20_000)
	for i := range vocab {
		vocab[i] = benchWord(i)
	}
	ix := NewIndex()
	seq := uint64(0)
	roles := []string{"user", "assistant", "tool", "assistant"}
	for s := range benchSessions {
		sid := fmt.Sprintf("sess-%05d", s)
		seq++
		ix.Add(&heraldpb.TranscriptEntry{SessionId: sid, Index: 0, Message: &heraldpb.ChatMessage{Role: "system", Content: "You are Herald."}}, seq)
		for m := 1; m <= benchMessages; m++ {
			words := make([]string, 20+rng.IntN(120))
			for i := range words {
				words[i] = vocab[zipf.Uint64()]
			}
			text := strings.Join(words, " ")
			if s == 4321 && m == 7 {
				text = "the staging database lives on port 6543 " + text
			}
			seq++
			ix.Add(&heraldpb.TranscriptEntry{SessionId: sid, Index: int32(m), TsUnixMs: int64(s),
				Message: &heraldpb.ChatMessage{Role: roles[m%len(roles)], Content: text}}, seq)
		}
	}
	return ix
}

// benchQueries mix a phrase, words of every frequency (the vocabulary's 1st,
// 10th, 100th, 1,000th and 10,000th most common) and a miss.
var benchQueries = func() []string {
	w := func(rank int) string { return benchWord(rank) }
	return []string{"staging database port 6543", w(0), w(9) + " " + w(99), w(999) + " " + w(9999), w(99) + " " + w(999) + " " + w(9999), "nothing-matches-this"}
}()

func benchWord(rank int) string { return fmt.Sprintf("w%x", rank*2654435761%1_000_003) }

// BenchmarkSessionSearch measures one ranked search over 10,000 sessions
// (200,000 messages) in the index.
func BenchmarkSessionSearch(b *testing.B) {
	ix := benchIndex(b)
	require.Equal(b, "sess-04321", ix.Search("staging database port", 3, "")[0].SessionID)
	for _, q := range benchQueries {
		b.Run(strings.ReplaceAll(q, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				ix.Search(q, 3, "")
			}
		})
	}
}

// BenchmarkSessionSearchOverBus measures session search as people and tools
// see it: a request to a running memory service over NATS, answered from
// an index of 10,000 sessions.
func BenchmarkSessionSearchOverBus(b *testing.B) {
	bus := heraldtest.StartBus(b)
	s := startService(b, bus, testConfig(b), "mem-bench")
	s.index.replace(benchIndex(b))
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q, _ := json.Marshal(SearchRequest{Query: benchQueries[i%len(benchQueries)], Limit: 3})
		m, err := bus.NC.RequestWithContext(ctx, SearchSubject, q)
		if err != nil {
			b.Fatal(err)
		}
		var r SearchReply
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Error != "" {
			b.Fatal(err, r.Error)
		}
	}
}

// BenchmarkIndexSaveLoad measures what a restart costs: saving and loading
// the index of 10,000 sessions.
func BenchmarkIndexSaveLoad(b *testing.B) {
	ix := benchIndex(b)
	path := filepath.Join(b.TempDir(), "index.gob")
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		require.NoError(b, ix.Save(path))
		saved := time.Since(start)
		_, err := LoadIndex(path)
		require.NoError(b, err)
		b.ReportMetric(float64(saved.Milliseconds()), "save-ms")
		if st, err := os.Stat(path); err == nil {
			b.ReportMetric(float64(st.Size())/1e6, "file-MB")
		}
	}
}

// BenchmarkIndexBuild measures indexing 10,000 sessions from scratch and
// the memory the index holds.
func BenchmarkIndexBuild(b *testing.B) {
	var ix *Index
	for b.Loop() {
		ix = benchIndex(b)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/1e6, "heap-MB")
	runtime.KeepAlive(ix)
}
