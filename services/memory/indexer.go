package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// transcriptFilter selects every session's transcript on SESSIONS.
const transcriptFilter = bus.SessionLogFilter

// indexer keeps an Index up to date from the SESSIONS stream. Every memory
// instance reads the whole stream (an ordered consumer, not a shared
// durable: each instance answers searches from its own index) starting
// after the last sequence its saved index holds.
// claimTimeout bounds fetching a transcript entry stored by claim-check.
const claimTimeout = 30 * time.Second

type indexer struct {
	js     jetstream.JetStream
	index  *Index
	path   string
	log    zerolog.Logger
	cc     jetstream.ConsumeContext
	cancel context.CancelFunc
	done   chan struct{}

	caughtUp  chan struct{}
	caughtOne sync.Once
	savedSeq  uint64
}

func startIndexer(ctx context.Context, js jetstream.JetStream, ix *Index, cfg Config, log zerolog.Logger) (*indexer, error) {
	in := &indexer{js: js, index: ix, path: cfg.IndexPath, log: log, done: make(chan struct{}), caughtUp: make(chan struct{})}
	in.load()
	stream, err := js.Stream(ctx, bus.StreamSessions)
	if err != nil {
		return nil, fmt.Errorf("memory: stream %s: %w", bus.StreamSessions, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("memory: stream %s: %w", bus.StreamSessions, err)
	}
	if !ix.belongsTo(info.Created, info.State.LastSeq) {
		log.Warn().Str("stream", bus.StreamSessions).Msg("saved session index belongs to another SESSIONS stream; rebuilding")
		fresh := NewIndex()
		fresh.StreamCreated = info.Created
		ix.replace(fresh)
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{transcriptFilter}}
	if seq := ix.lastSeq(); seq > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	cons, err := js.OrderedConsumer(ctx, bus.StreamSessions, occ)
	if err != nil {
		return nil, fmt.Errorf("memory: transcript consumer: %w", err)
	}
	if ci, err := cons.Info(ctx); err == nil && ci.NumPending == 0 {
		in.markCaughtUp()
	}
	in.cc, err = cons.Consume(in.apply)
	if err != nil {
		return nil, fmt.Errorf("memory: consume transcripts: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	in.cancel = cancel
	go in.saveLoop(runCtx, cfg.IndexSaveEvery)
	return in, nil
}

// load restores the saved index; a missing or unreadable file means the
// index is rebuilt from the stream.
func (in *indexer) load() {
	if in.path == "" {
		return
	}
	saved, err := LoadIndex(in.path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		in.log.Warn().Err(err).Msg("saved session index unreadable; rebuilding from the stream")
		return
	}
	in.index.replace(saved)
	in.savedSeq = saved.LastSeq
}

func (in *indexer) apply(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	var e heraldpb.TranscriptEntry
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	data, err := bus.Payload(ctx, in.js, msg)
	cancel()
	if err == nil {
		err = bus.Decode(data, &e)
	}
	if err != nil {
		in.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("transcript entry not indexed")
		e = heraldpb.TranscriptEntry{}
	}
	in.index.Add(&e, meta.Sequence.Stream)
	if meta.NumPending == 0 {
		in.markCaughtUp()
	}
}

func (in *indexer) markCaughtUp() { in.caughtOne.Do(func() { close(in.caughtUp) }) }

// waitCaughtUp waits (bounded by ctx) until the index has read what the
// stream held at start-up, so a search right after a restart is complete.
func (in *indexer) waitCaughtUp(ctx context.Context) {
	select {
	case <-in.caughtUp:
	case <-ctx.Done():
	}
}

func (in *indexer) saveLoop(ctx context.Context, every time.Duration) {
	defer close(in.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := in.save(); err != nil {
				in.log.Warn().Err(err).Msg("saving session index failed")
			}
		}
	}
}

// save writes the index when it changed since the last save.
func (in *indexer) save() error {
	seq := in.index.lastSeq()
	if in.path == "" || seq == in.savedSeq {
		return nil
	}
	if err := in.index.Save(in.path); err != nil {
		return err
	}
	in.savedSeq = seq
	return nil
}

func (in *indexer) stop() error {
	in.cc.Stop()
	in.cancel()
	<-in.done
	return in.save()
}
