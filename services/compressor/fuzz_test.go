package compressor

import (
	"context"
	"errors"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// FuzzCompressRequest decodes herald.compress.request.<sid> payloads as
// handle does: garbage is a Permanent error (dead-lettered), an invalid
// request names its field with ErrInvalidRequest, and a valid one is
// compressed (with the model summary unavailable, so the deterministic
// summary runs) without panicking, into a non-empty history whose
// reported token estimate is its own.
// Seeds: testdata/fuzz/FuzzCompressRequest.
func FuzzCompressRequest(f *testing.F) {
	cfg := DefaultConfig()
	c := &compressor{cfg: cfg, summarize: func(context.Context, *heraldpb.CompressRequest, string, []*heraldpb.ChatMessage, string) (string, spend, error) {
		return "", spend{}, errors.New("no model in a fuzz test")
	}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req heraldpb.CompressRequest
		if err := bus.Decode(data, &req); err != nil {
			require.True(t, bus.IsPermanent(err))
			return
		}
		if err := validate(&req); err != nil {
			require.ErrorIs(t, err, ErrInvalidRequest)
			return
		}
		out := c.compress(context.Background(), &req)
		for i, m := range out.messages {
			require.NotNil(t, m, "message %d", i)
		}
		if len(req.Messages) > 0 {
			require.NotEmpty(t, out.messages)
		}
		require.Equal(t, estimateTokens(out.messages), out.after)
	})
}
