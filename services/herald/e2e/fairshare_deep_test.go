package e2e

import (
	"context"
	"fmt"
	"sync"
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
	before := results.answeredBefore("a", "g-0")
	t.Logf("globex answered after %d of acme's %d", before, flood)
	// reached by the window alone, it comes after about flood-1,024
	require.Less(t, before, flood*3/10, "globex waited behind acme's flood")
}

// TestASubtaskBehindAFloodIsServed: globex's session delegates after acme
// published 2,000 tasks, so its child's task lands behind all of them, on
// herald.subtasks.globex (or, for a parent whose task named its tenant
// inside, on herald.subtasks). The loop reads it past its crowded window as
// it reads a task: the parent, whose turn waits for its child, answers
// before three tenths of acme's. Reached by the window alone, the child
// started after about 1,000 of them.
func TestASubtaskBehindAFloodIsServed(t *testing.T) {
	for _, c := range []struct{ name, parentSubject string }{
		{"tenant subject", bus.TenantTasks("globex")},
		{"shared subject", bus.TasksSubject},
	} {
		t.Run(c.name, func(t *testing.T) { subtaskBehindAFlood(t, 2000, c.parentSubject) })
	}
}

func subtaskBehindAFlood(t *testing.T, flood int, parentSubject string) {
	asked, flooded := make(chan struct{}), make(chan struct{})
	var askedOnce sync.Once
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		switch r.FirstUser() {
		case "globex parent":
			if r.AssistantCount() > 0 {
				return scripted.Text("parent done")
			}
			// delegate only once acme's flood is in the stream
			askedOnce.Do(func() { close(asked) })
			<-flooded
			return scripted.Tool("delegate_task", `{"goal":"globex child"}`)
		case "globex child":
			return scripted.Text("child done")
		}
		return scripted.Text("done")
	})
	h.StopEventLog()
	letDelegate := sync.OnceFunc(func() { close(flooded) })
	t.Cleanup(letDelegate) // a failed test leaves no model call hanging (before the harness stops)
	results := countResults(t, h)
	parent := proto.Task{Prompt: "globex parent", SessionID: "s-globex", TaskID: "g-0", Tenant: "globex"}
	h.submitOn(parentSubject, parent)
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the parent's first model call never came")
	}
	publishAll(t, h, "acme", "a", flood)
	letDelegate()
	res := h.WaitResult(parent, 3*time.Minute)
	require.Equal(t, "parent done", res.FinalResponse)
	require.Equal(t, []string{"child done"}, toolContents(h.Transcript(parent.SessionID)))
	require.Eventually(t, func() bool { return results.of("a") == flood }, 3*time.Minute, 10*time.Millisecond)
	before := results.answeredBefore("a", parent.TaskID)
	t.Logf("globex's parent answered after %d of acme's %d", before, flood)
	require.Less(t, before, flood*3/10, "globex's child waited behind acme's flood")
}
