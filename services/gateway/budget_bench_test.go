package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

// BenchmarkBudgetReserveSettle measures what a budget window adds to one
// model call of a budgeted tenant: the hold before it and the settlement
// after (two compare-and-set round trips on the embedded JetStream), alone
// and with 16×GOMAXPROCS calls of the same tenant contending for its
// window (ns/op is then the window's throughput: its calls are serialised).
//
//	go test ./services/gateway -run '^$' -bench BudgetReserveSettle -benchtime 2000x
func BenchmarkBudgetReserveSettle(b *testing.B) {
	for _, parallel := range []int{1, 16} {
		b.Run(fmt.Sprintf("parallelism=%d", parallel), func(b *testing.B) {
			bs := heraldtest.StartBus(b)
			s := &spendLedgers{kv: bus.NewLazyBucket(bs.JS, bus.BucketSpend), log: heraldtest.Logger(b)}
			w := []BudgetWindow{{Scope: ScopeTenant, ID: "acme", Name: "daily", Period: "2026-12-03", Limit: 1e9}}
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(parallel)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("call-%d", n.Add(1))
					refused, err := s.reserve(ctx, w, id, 1000, time.Now().Add(time.Minute), time.Now)
					require.NoError(b, err)
					require.Nil(b, refused)
					s.settle(ctx, w, id, 900)
				}
			})
		})
	}
}
