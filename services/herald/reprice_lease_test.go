package main

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

// A reprice longer than the lease bucket's TTL keeps its lease (it renews
// it), so a second one started meanwhile is refused all along; released,
// the next one may run.
func TestRepriceLeaseOutlivesTheBucketTTLWhileHeld(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	held, release, err := takeRepriceLease(ctx, b.JS)
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool {
		_, _, err := takeRepriceLease(ctx, b.JS)
		require.ErrorContains(t, err, "another herald cost reprice is running")
		return time.Since(start) > bus.AccountingLeaseTTL+2*time.Second
	}, 3*bus.AccountingLeaseTTL, 500*time.Millisecond)
	require.NoError(t, held.Err(), "the lease was never lost")
	release()
	require.ErrorIs(t, held.Err(), context.Canceled)
	_, again, err := takeRepriceLease(ctx, b.JS)
	require.NoError(t, err)
	again()
}
