package bus_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A batch stores its messages in the order they were added, each id once,
// and one too large for a message by claim.
func TestBatchStoresInOrderOncePerID(t *testing.T) {
	js := smallBus(t)
	ctx := context.Background()
	subject := bus.SessionLog("s1")
	big := bytes.Repeat([]byte("history "), 1<<16) // 512 KiB, over the limit
	b := bus.NewBatch(js)
	b.Add(ctx, subject, "log:s1:0", []byte("zero"))
	b.Add(ctx, subject, "log:s1:1", big)
	b.Add(ctx, subject, "log:s1:2", []byte("two"))
	b.Add(ctx, subject, "log:s1:0", []byte("zero again"))
	require.NoError(t, b.Wait(ctx))

	stream, err := js.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	var got [][]byte
	for seq := uint64(1); ; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if err != nil {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
			break
		}
		data, err := bus.Resolve(ctx, js, raw.Subject, raw.Header, raw.Data)
		require.NoError(t, err)
		got = append(got, data)
	}
	require.Equal(t, [][]byte{[]byte("zero"), big, []byte("two")}, got)
}

// A message no stream takes fails the batch.
func TestBatchReportsAMessageNotStored(t *testing.T) {
	js := smallBus(t)
	ctx := context.Background()
	b := bus.NewBatch(js)
	b.Add(ctx, bus.SessionLog("s1"), "log:s1:0", []byte("zero"))
	b.Add(ctx, "nowhere.at.all", "x", []byte("lost"))
	require.Error(t, b.Wait(ctx))
}
