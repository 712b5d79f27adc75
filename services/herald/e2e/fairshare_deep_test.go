package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// TestATenantBehindAFloodDeeperThanTheLoopsWindowIsServed: acme publishes
// 3,000 tasks, three times the loop's window, then globex one. globex's
// answer comes before most of acme's: the loop reads it past its crowded
// window (pkg/bus/peek.go). First come, first served, or with the window
// alone, it waits for some 2,000 of acme's tasks to start first.
func TestATenantBehindAFloodDeeperThanTheLoopsWindowIsServed(t *testing.T) {
	const flood = 3000
	h := Start(t, func(*scripted.Request) scripted.Reply { return scripted.Reply{Content: "done"} })
	h.StopEventLog()
	results := countResults(t, h)
	publishAll(t, h, "acme", "a", flood)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	task := proto.Task{Prompt: "globex task", SessionID: "s-globex", TaskID: "g-0"}
	require.NoError(t, bus.PublishJSON(ctx, h.JS, bus.TenantTasks("globex"), "", task))
	require.Eventually(t, func() bool { return results.of("a") == flood && results.of("g") == 1 }, 3*time.Minute, 10*time.Millisecond)
	globex := results.when("g-0")
	before := 0
	results.mu.Lock()
	for id, at := range results.at {
		if strings.HasPrefix(id, "a-") && at.Before(globex) {
			before++
		}
	}
	results.mu.Unlock()
	t.Logf("globex answered after %d of acme's %d", before, flood)
	require.Less(t, before, flood/2, "globex waited behind acme's flood")
}
