package loop

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// fillRandom sets every field reachable from v to a random value: strings
// (now and then invalid UTF-8 when bad is set), numbers, pointers present
// or nil, slices nil, empty or holding values.
func fillRandom(r *rand.Rand, v reflect.Value, bad bool) {
	switch v.Kind() {
	case reflect.String:
		s := []string{"", "plain", "<b>&amp;</b>", "é 日本 🙂", "\u2028\"\\\n", "x"}[r.IntN(6)]
		if bad && r.IntN(40) == 0 {
			s += "\xff"
		}
		v.SetString(s)
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(r.Int64N(1<<53) - 1<<52)
	case reflect.Uint64:
		v.SetUint(r.Uint64())
	case reflect.Float64:
		v.SetFloat(r.NormFloat64() * 1e3)
	case reflect.Struct:
		for i := range v.NumField() {
			fillRandom(r, v.Field(i), bad)
		}
	case reflect.Pointer:
		if r.IntN(4) > 0 {
			p := reflect.New(v.Type().Elem())
			fillRandom(r, p.Elem(), bad)
			v.Set(p)
		}
	case reflect.Slice:
		switch n := r.IntN(4); n {
		case 0: // nil
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range s.Len() {
				fillRandom(r, s.Index(i), bad)
			}
			v.Set(s)
		}
	default:
		panic("fillRandom: a State field of kind " + v.Kind().String() + " needs handling in snapshot and here")
	}
}

// scribble changes every value reachable from v in place: strings, numbers
// and flags, and what pointers and slices hold.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Struct:
		for i := range v.NumField() {
			scribble(v.Field(i))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	}
}

func decodedRecord(t *testing.T, st *State) *State {
	data, err := json.Marshal(st)
	require.NoError(t, err)
	got, err := record{data: data, rev: 1}.decode("s1")
	require.NoError(t, err)
	return got
}

// TestSnapshotIsTheRecordDecoded: the state a transition decides on without
// decoding is the state decoding the committed record gives, field for
// field, and it shares nothing with the state it was copied from.
func TestSnapshotIsTheRecordDecoded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 14))
	copied, refused := 0, 0
	for range 2000 {
		var st State
		fillRandom(r, reflect.ValueOf(&st).Elem(), true)
		want := decodedRecord(t, &st)
		snap := snapshot(&st)
		if snap == nil {
			refused++
			require.NotEqual(t, want, &st, "only a state JSON changes is decoded instead")
			continue
		}
		copied++
		require.Equal(t, want, snap)
		// whatever the committing transition does to its state afterwards,
		// in place, leaves the copy as the record
		scribble(reflect.ValueOf(&st).Elem())
		require.Equal(t, want, snap)
	}
	// each string field may come up invalid UTF-8, so the more fields the
	// state has, the fewer copies; a good share must still be copied
	require.Greater(t, copied, 800)
	require.Positive(t, refused, "states with invalid UTF-8 came up")
}

// BenchmarkStateForNextTransition: what a transition pays for the state it
// decides on, copied (snapshot) or decoded from the record as before.
func BenchmarkStateForNextTransition(b *testing.B) {
	st := &State{SessionID: "s-188b8710-2667", TaskID: "t-1", Tenant: "default", Model: "test-model", Pool: "default",
		Status: statusActing, Turn: 1, Step: 4, MaxIterations: 90, TranscriptLen: 9, LogChain: 0xf9d37234027c0880,
		Pending: &Pending{Kind: waitTools, Calls: []PendingCall{{CallID: "t1s4c0", ModelID: "call_4", Tool: "read_file",
			Args: `{"limit":4,"path":"data.txt"}`, Segment: 0}}},
		APICalls: 4, CostUSD: 0.000123, EventSeq: 17, TurnStartedMs: 1764633600000,
		LastFingerprint: "read_file {\"limit\":3,\"path\":\"data.txt\"} 1a2b", SentRef: &SentRef{Log: "s-188b8710-2667", Len: 7, Chain: 42}}
	data, err := json.Marshal(st)
	require.NoError(b, err)
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			if snapshot(st) == nil {
				b.Fatal("no copy")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := (record{data: data, rev: 1}).decode("s1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
