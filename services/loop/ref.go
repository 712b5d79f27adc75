package loop

import (
	"slices"

	"github.com/heraldrun/herald/proto/heraldpb"
	gproto "google.golang.org/protobuf/proto"
)

// SentRef is the transcript prefix a model request covered: the first Len
// messages of Log, whose chain through the last is Chain.
type SentRef struct {
	Log   string `json:"log"`
	Len   int    `json:"len"`
	Chain uint64 `json:"chain"`
}

// transcriptRef splits a request's messages into the part that is the
// transcript as stored (referred to, see heraldpb.TranscriptRef) and the
// rest, which travels as it is. Of the referred part only the entries the
// session's previous request did not cover are carried, so a request's
// bytes grow with what the step added, not with the history; the gateway
// holds the earlier ones (or reads them from the log) and checks them
// against the chain. It returns no reference when the request does not
// start with the committed transcript (a repaired or recalled history):
// then everything is carried, as before.
func (t *txn) transcriptRef(msgs []*heraldpb.ChatMessage) (*heraldpb.TranscriptRef, []*heraldpb.ChatMessage) {
	st := t.st
	base := len(t.msgs)
	if st == nil || base == 0 && len(t.appended) == 0 {
		return nil, msgs
	}
	hist := t.history()
	n := 0 // messages the request shares with the transcript, as the same values
	for n < len(msgs) && n < len(hist) && msgs[n] == hist[n] {
		n++
	}
	if n < base || n == 0 {
		return nil, msgs
	}
	chain := t.baseChain
	for _, m := range t.appended[:n-base] {
		chain = t.chainNext(chain, m)
	}
	ref := &heraldpb.TranscriptRef{LogId: st.logID(), Chain: chain}
	if p := st.SentRef; p != nil && p.Log == ref.LogId && p.Len <= n && covers(p, hist[:n], chain, t.chainNext) {
		ref.From, ref.FromChain = int32(p.Len), p.Chain
	}
	ref.Entries = hist[ref.From:n]
	st.SentRef = &SentRef{Log: ref.LogId, Len: n, Chain: chain}
	return ref, msgs[n:]
}

// covers reports whether hist, whose chain is chain, extends the prefix p:
// the chain from p through the messages after it (each link computed by
// next) must come out at chain.
func covers(p *SentRef, hist []*heraldpb.ChatMessage, chain uint64, next func(uint64, *heraldpb.ChatMessage) uint64) bool {
	c := p.Chain
	for _, m := range hist[p.Len:] {
		c = next(c, m)
	}
	return c == chain
}

// sameValues returns msgs, a copy of orig that someone edited (a hook's
// context), with every message still equal to orig's replaced by orig's own
// value, so the unedited transcript can still be referred to.
func sameValues(msgs, orig []*heraldpb.ChatMessage) []*heraldpb.ChatMessage {
	if len(msgs) != len(orig) || len(msgs) == 0 || msgs[0] == orig[0] {
		return msgs
	}
	out := slices.Clone(msgs)
	for i, m := range out {
		if gproto.Equal(m, orig[i]) {
			out[i] = orig[i]
		}
	}
	return out
}
