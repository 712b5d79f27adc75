package e2e

import (
	"context"
	"fmt"
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
	floodPastTheWindow(t, 3000, bus.TenantTasks("acme"), bus.TenantTasks("globex"))
}

// TestATenantBehindAFloodOnHeraldTasksIsServed: the same on herald.tasks,
// where each task names its tenant inside: the loop reads on past its
// window to learn whose each task is.
func TestATenantBehindAFloodOnHeraldTasksIsServed(t *testing.T) {
	floodPastTheWindow(t, 2000, bus.TasksSubject, bus.TasksSubject)
}

// floodPastTheWindow publishes flood tasks of acme on acmeSubject, then one
// of globex on globexSubject (each task naming its tenant), and checks
// globex is answered before three tenths of acme's.
func floodPastTheWindow(t *testing.T, flood int, acmeSubject, globexSubject string) {
	h := Start(t, func(*scripted.Request) scripted.Reply { return scripted.Reply{Content: "done"} })
	h.StopEventLog()
	results := countResults(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batch := bus.NewBatch(h.JS)
	for i := range flood {
		batch.JSON(ctx, acmeSubject, "", proto.Task{Prompt: fmt.Sprintf("acme %d", i), SessionID: fmt.Sprintf("sa-%d", i),
			TaskID: fmt.Sprintf("a-%d", i), Tenant: "acme"})
	}
	require.NoError(t, batch.Wait(ctx))
	task := proto.Task{Prompt: "globex task", SessionID: "s-globex", TaskID: "g-0", Tenant: "globex"}
	require.NoError(t, bus.PublishJSON(ctx, h.JS, globexSubject, "", task))
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
	// reached by the window alone, it comes after about flood-1,024
	require.Less(t, before, flood*3/10, "globex waited behind acme's flood")
}
