package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderMigratedFrom names, on a transcript entry moved out of the public
// namespace, the SESSIONS sequence it was stored at before.
const HeaderMigratedFrom = "Herald-Migrated-From"

// migrateSessionLogs moves the transcript entries of a SESSIONS stream
// declared by a release that kept them under herald.session.<sid>.log (see
// LegacySessionLogFilter) to herald.internal.session.<sid>.log, oldest
// first, so the sessions of an old data folder continue. The stream takes
// the new subject first and keeps the old one until every entry is moved:
// a start that stops half-way finds the old subject still declared and
// moves the rest. An entry is stored anew (a new id, so a recent one is not
// taken for a retry of itself; an entry copied twice by a stop between copy
// and delete is a repeat its readers already resolve by index) before the
// old copy is deleted. It reports how many entries it moved.
func migrateSessionLogs(ctx context.Context, js jetstream.JetStream, have jetstream.StreamConfig) (int, error) {
	if !slices.Contains(have.Subjects, LegacySessionLogFilter) {
		return 0, nil
	}
	if !slices.Contains(have.Subjects, SessionLogFilter) {
		cfg := have
		cfg.Subjects = append(slices.Clone(have.Subjects), SessionLogFilter)
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return 0, fmt.Errorf("add %s to stream %s: %w", SessionLogFilter, StreamSessions, err)
		}
	}
	stream, err := js.Stream(ctx, StreamSessions)
	if err != nil {
		return 0, err
	}
	moved := 0
	for seq := uint64(1); ; {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(LegacySessionLogFilter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return moved, nil
		}
		if err != nil {
			return moved, fmt.Errorf("read %s entry after %d: %w", StreamSessions, seq, err)
		}
		seq = raw.Sequence + 1
		if err := moveEntry(ctx, js, stream, raw); err != nil {
			return moved, err
		}
		moved++
	}
}

func moveEntry(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, raw *jetstream.RawStreamMsg) error {
	p := strings.Split(raw.Subject, ".")
	if len(p) != 4 {
		return fmt.Errorf("transcript subject %q", raw.Subject)
	}
	msg := nats.NewMsg(SessionLog(p[2]))
	msg.Data = raw.Data
	for k, v := range raw.Header {
		if !strings.HasPrefix(k, "Nats-") {
			msg.Header[k] = v
		}
	}
	from := strconv.FormatUint(raw.Sequence, 10)
	msg.Header.Set(HeaderMigratedFrom, from)
	msg.Header.Set(jetstream.MsgIDHeader, "migrated:"+from)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("move transcript entry %d of %s: %w", raw.Sequence, p[2], err)
	}
	if err := stream.DeleteMsg(ctx, raw.Sequence); err != nil {
		if _, gone := stream.GetMsg(ctx, raw.Sequence); errors.Is(gone, jetstream.ErrMsgNotFound) {
			return nil // another process moved it meanwhile
		}
		return fmt.Errorf("delete moved transcript entry %d: %w", raw.Sequence, err)
	}
	return nil
}
