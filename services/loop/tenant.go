package loop

import (
	"fmt"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
)

// bindTenant applies what the task's subject says about its tenant: a task
// on herald.tasks.<tenant> belongs to that tenant whatever its publisher
// might claim, so a body naming another tenant is refused (dead-lettered),
// never run.
func bindTenant(task *proto.Task, subject string) error {
	tenant, bound := bus.TaskTenant(subject)
	if !bound {
		if first, _, _ := strings.Cut(strings.TrimPrefix(task.Workspace, "./"), "/"); first == bus.TenantsFolder {
			return fmt.Errorf("%w: workspace %q: the %s folder holds the workspaces of tenant-bound tasks; publish on %s instead",
				proto.ErrInvalidTask, task.Workspace, bus.TenantsFolder, bus.TenantTasks("<tenant>"))
		}
		return nil
	}
	if task.Tenant != "" && task.Tenant != tenant {
		return fmt.Errorf("%w: published on %s, the task of tenant %q, but its body names tenant %q", proto.ErrInvalidTask, subject, tenant, task.Tenant)
	}
	if strings.HasPrefix(task.Workspace, "/") || hasDotDot(task.Workspace) {
		return fmt.Errorf("%w: workspace %q must be a folder inside the tenant's workspace (no '..', not absolute)", proto.ErrInvalidTask, task.Workspace)
	}
	task.Tenant, task.BoundTenant = tenant, tenant
	return nil
}

// checkBinding refuses a task that would continue a session bound to
// another tenant, or mix bound and unbound tasks in one session.
func checkBinding(st *State, task proto.Task) error {
	if st == nil || st.Turn == 0 || st.BoundTenant == task.BoundTenant {
		return nil
	}
	if st.BoundTenant == "" {
		return fmt.Errorf("%w: session %s was not started on a tenant's subject; continue it on %s", proto.ErrInvalidTask, st.SessionID, bus.TasksSubject)
	}
	return fmt.Errorf("%w: session %s belongs to another tenant", proto.ErrInvalidTask, st.SessionID)
}

// toolWorkspace is the folder, under the tool runner's root, the session's
// tools work in: tenants/<tenant>/<workspace> for a tenant-bound session.
func (st *State) toolWorkspace() string {
	if st.BoundTenant == "" {
		return st.Workspace
	}
	return bus.TenantWorkspace(st.BoundTenant, st.Workspace)
}

// taskSubject is where the session's child tasks go: a bound session's
// children are bound to its tenant too.
func (st *State) taskSubject() string {
	if st.BoundTenant == "" {
		return bus.TasksSubject
	}
	return bus.TenantTasks(st.BoundTenant)
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
