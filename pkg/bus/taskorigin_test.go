package bus_test

import (
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

func TestTaskOriginOfReadsEveryTaskSubject(t *testing.T) {
	good := map[string]bus.TaskOrigin{
		"herald.tasks":                            {},
		"herald.tasks.acme":                       {Tenant: "acme"},
		"herald.tasks.a_b-9":                      {Tenant: "a_b-9"},
		"herald.subtasks":                         {Subagent: true},
		"herald.subtasks.acme":                    {Tenant: "acme", Subagent: true},
		"herald.apitasks":                         {API: true},
		"herald.apitasks.acme":                    {Tenant: "acme", API: true},
		bus.TenantTasks(strings.Repeat("x", 128)): {Tenant: strings.Repeat("x", 128)},
	}
	for subject, want := range good {
		got, err := bus.TaskOriginOf(subject)
		require.NoError(t, err, subject)
		require.Equal(t, want, got, subject)
	}
	// Tokens the TASKS stream captures (herald.tasks.*) but that name no
	// tenant: never an unbound task.
	for _, subject := range []string{"herald.tasks.café", bus.TenantTasks(strings.Repeat("x", 129)), "herald.tasks.*",
		"herald.tasks.>", "herald.tasks.ac%me", "herald.tasks.", "herald.subtasks.café", "herald.apitasks.café", "herald.apitasks.a.b", "herald.tasksx", "herald.other"} {
		_, err := bus.TaskOriginOf(subject)
		require.ErrorIs(t, err, bus.ErrTaskSubject, subject)
		tenant, ok := bus.TaskTenant(subject)
		require.False(t, ok, subject)
		require.Empty(t, tenant, subject)
	}
}

func FuzzTaskOriginOf(f *testing.F) {
	for _, s := range []string{"herald.tasks", "herald.tasks.acme", "herald.subtasks.x", "herald.tasks.café", "herald.tasks.a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		o, err := bus.TaskOriginOf(subject)
		if err != nil {
			return
		}
		base := bus.TasksSubject
		switch {
		case o.Subagent:
			base = bus.SubtasksSubject
		case o.API:
			base = bus.APITasksSubject
		}
		if o.Tenant == "" {
			require.Equal(t, base, subject)
			return
		}
		require.True(t, proto.IsToken(o.Tenant))
		require.Equal(t, base+"."+o.Tenant, subject)
	})
}
