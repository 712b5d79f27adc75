package loop

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// handleCompressResult continues a session whose history was compressed.
func (s *Service) handleCompressResult(ctx context.Context, msg jetstream.Msg) error {
	return nil
}
