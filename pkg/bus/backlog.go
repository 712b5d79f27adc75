package bus

import (
	"context"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/nats-io/nats.go/jetstream"
)

// backlog reads a consumer's waiting and redelivered work for /metrics.
func backlog(cons jetstream.Consumer) telemetry.ConsumerInfo {
	return func(ctx context.Context) (telemetry.ConsumerCounts, error) {
		info, err := cons.Info(ctx)
		if err != nil {
			return telemetry.ConsumerCounts{}, err
		}
		return telemetry.ConsumerCounts{Pending: info.NumPending, AckPending: uint64(info.NumAckPending),
			Redelivered: uint64(info.NumRedelivered)}, nil
	}
}
