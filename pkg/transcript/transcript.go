// Package transcript reads session transcripts from the SESSIONS stream and
// computes their chain hashes. The loop appends the entries; the gateway
// rebuilds the history an LLM request refers to from the same entries.
package transcript

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// Chain extends a log's chain hash prev with m (TranscriptEntry.chain).
func Chain(prev uint64, m *heraldpb.ChatMessage) uint64 {
	data, _ := gproto.MarshalOptions{Deterministic: true}.Marshal(m)
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], prev)
	h.Write(b[:])
	h.Write(data)
	return h.Sum64()
}

// ReadEntries reads the first n transcript entries (n < 0: all) of the log
// sid in index order. An index written more than once (by a transition that
// lost its commit or crashed before it, and by the committed one) is
// resolved by the chain: walking back from chain, the chain hash of the
// state's last committed entry, each index takes the entry whose chain is
// the one the next entry extends. Where no entry matches (a log written
// before chains, or chain 0 for unknown), the latest write of the index wins.
func ReadEntries(ctx context.Context, js jetstream.JetStream, sid string, n int, chain uint64) ([]*heraldpb.TranscriptEntry, error) {
	if n == 0 {
		return nil, nil
	}
	stream, err := js.Stream(ctx, bus.StreamSessions)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	subject := bus.SessionLog(sid)
	byIndex := map[int32][]*heraldpb.TranscriptEntry{} // each index's writes, oldest first
	for seq := uint64(1); ; {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read transcript %s: %w", sid, err)
		}
		seq = raw.Sequence + 1
		data, err := bus.Resolve(ctx, js, raw.Subject, raw.Header, raw.Data)
		if err != nil {
			return nil, fmt.Errorf("transcript %s entry %d: %w", sid, raw.Sequence, err)
		}
		e := &heraldpb.TranscriptEntry{}
		if err := gproto.Unmarshal(data, e); err != nil {
			return nil, fmt.Errorf("transcript %s entry %d: %w", sid, raw.Sequence, err)
		}
		byIndex[e.Index] = append(byIndex[e.Index], e)
	}
	have := 0
	for len(byIndex[int32(have)]) > 0 {
		have++
	}
	if n < 0 {
		n = have
	}
	if have < n {
		return nil, fmt.Errorf("transcript %s has %d of %d messages", sid, have, n)
	}
	out := make([]*heraldpb.TranscriptEntry, n)
	for i := n - 1; i >= 0; i-- {
		writes := byIndex[int32(i)]
		e := writes[len(writes)-1]
		for _, w := range writes {
			if w.Chain == chain {
				e = w
			}
		}
		out[i], chain = e, e.PrevChain
	}
	return out, nil
}
