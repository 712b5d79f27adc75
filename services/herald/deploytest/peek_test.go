package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestOnlyTheLoopReadsPastItsWindowAndDeletesTasks: a loop whose window is
// crowded by one tenant reads another tenant's oldest task straight from
// TASKS and deletes it once handled (pkg/bus/peek.go); its user may, and
// nobody else may delete a task, tenants and clients included: a deleted
// task is never run.
func TestOnlyTheLoopReadsPastItsWindowAndDeletesTasks(t *testing.T) {
	s := startSecured(t)
	s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acme := s.connect(t, "tenant_acme")
	require.NoError(t, bus.Publish(ctx, acme.js, bus.TenantTasks("acme"), "", []byte(`{"prompt":"hello"}`)))

	loop := s.connect(t, "loop")
	stream, err := loop.js.Stream(ctx, bus.StreamTasks)
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(bus.TenantTasksFilter))
	require.NoError(t, err, "the loop asks which tenants have tasks waiting")
	require.Equal(t, uint64(1), info.State.Subjects[bus.TenantTasks("acme")])
	raw, err := stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(bus.TenantTasks("acme")))
	require.NoError(t, err, "the loop reads a tenant's oldest task")
	require.JSONEq(t, `{"prompt":"hello"}`, string(raw.Data))

	users := usersBut("loop")
	del := "$JS.API.STREAM.MSG.DELETE." + bus.StreamTasks
	for _, u := range users {
		c := s.connect(t, u)
		require.NoError(t, c.nc.Publish(del, []byte(`{"seq":1}`)))
		c.requireDenied("publish", del)
	}
	require.NoError(t, stream.DeleteMsg(ctx, raw.Sequence), "the loop deletes a task it handled")
	_, err = stream.GetMsg(ctx, raw.Sequence)
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
}
