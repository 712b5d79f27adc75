package accounting

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// BucketLeases holds the insert leases of the sinks; pkg/bus declares it
// with everything else.
const BucketLeases = bus.BucketAccounting

// leaseTTL bounds how long a sink that died holding a lease blocks the
// others; an insert must finish well within it (see insertTimeout).
const leaseTTL = bus.AccountingLeaseTTL

// insertTimeout is the longest one check-and-insert may take while holding
// the lease, so it cannot outlive it.
const insertTimeout = leaseTTL / 2

// lease makes "which ids are stored? insert the rest" atomic across sink
// processes. ClickHouse has no transactions and does not deduplicate inserts
// into non-replicated tables, so without it two sinks handed two copies of
// one event (published twice beyond the bus's duplicate window) could both
// find it absent and both store it, and the roll-ups would count it twice.
type lease struct {
	kv  jetstream.KeyValue
	key string
}

func newLease(ctx context.Context, js jetstream.JetStream, stream string) (*lease, error) {
	kv, err := js.KeyValue(ctx, BucketLeases)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", BucketLeases, err)
	}
	return &lease{kv: kv, key: "insert." + stream}, nil
}

// hold runs f while holding the lease, waiting for it as long as ctx allows.
func (l *lease) hold(ctx context.Context, f func(ctx context.Context) error) error {
	rev, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// A lease that expired meanwhile was deleted by its TTL; fine.
		_ = l.kv.Delete(context.WithoutCancel(ctx), l.key, jetstream.LastRevision(rev))
	}()
	ctx, cancel := context.WithTimeout(ctx, insertTimeout)
	defer cancel()
	return f(ctx)
}

func (l *lease) acquire(ctx context.Context) (uint64, error) {
	wait := time.Millisecond
	for {
		rev, err := l.kv.Create(ctx, l.key, nil)
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("insert lease %s: %w", l.key, err)
		}
		if !sleep(ctx, wait) {
			return 0, ctx.Err()
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
