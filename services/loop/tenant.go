package loop

import (
	"fmt"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
)

// bindTask applies what the task's subject says about it: its tenant, and
// whether it is a subagent's task, the only kind that may name a parent.
func bindTask(task *proto.Task, subject string) error {
	origin, err := bus.TaskOriginOf(subject)
	if err != nil {
		return fmt.Errorf("%w: %v", proto.ErrInvalidTask, err)
	}
	if err := checkProvenance(*task, origin, subject); err != nil {
		return err
	}
	return bindTenant(task, origin.Tenant, subject)
}

// parentCallKey is the task metadata key naming the parent's delegate_task call.
const parentCallKey = "parent_call_id"

// checkProvenance refuses the loop-only fields (the parent session and its
// call) on a public task subject: naming another session's pending call
// would make this task's answer that call's result. A subagent's task must
// name both, and be the child that call spawns.
func checkProvenance(task proto.Task, origin bus.TaskOrigin, subject string) error {
	if !origin.API && !origin.Subagent {
		// naming another's key or schedule would charge its budget
		for field, v := range map[string]string{"api_key_id": task.APIKeyID, "schedule_id": task.ScheduleID} {
			if v != "" {
				return fmt.Errorf("%w: field %q is set only by Herald's api service (on %s*); it is refused on %s", proto.ErrInvalidTask, field, bus.APITasksSubject, subject)
			}
		}
	}
	parent, call := task.ParentSessionID, task.Metadata[parentCallKey]
	_, hasCall := task.Metadata[parentCallKey]
	if !origin.Subagent {
		for field, set := range map[string]bool{"parent_session_id": parent != "", "metadata.parent_call_id": hasCall} {
			if set {
				return fmt.Errorf("%w: field %q is set only by the loop, on a subagent's task; it is refused on %s", proto.ErrInvalidTask, field, subject)
			}
		}
		return nil
	}
	if !proto.IsToken(parent) || call == "" {
		return fmt.Errorf("%w: a task on %s must name its parent session and delegate_task call", proto.ErrInvalidTask, subject)
	}
	if want := childSessionID(parent, call); task.SessionID != want {
		return fmt.Errorf("%w: call %s of session %s spawns session %s, not %q", proto.ErrInvalidTask, call, parent, want, task.SessionID)
	}
	return nil
}

// bindTenant applies the tenant the task's subject names: a task on
// herald.tasks.<tenant> belongs to that tenant whatever its publisher might
// claim, so a body naming another tenant is refused (dead-lettered), never
// run.
func bindTenant(task *proto.Task, tenant, subject string) error {
	if tenant == "" {
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
// another tenant, or mix bound and unbound tasks in one session, or
// continue a subagent's session from anywhere but its parent: its next
// answer would go to the parent's call.
func checkBinding(st *State, task proto.Task) error {
	if st != nil && st.ParentSessionID != "" && task.ParentSessionID != st.ParentSessionID {
		return fmt.Errorf("%w: session %s is a subagent's session; only its parent continues it", proto.ErrInvalidTask, st.SessionID)
	}
	if st == nil || st.Turn == 0 || st.BoundTenant == task.BoundTenant {
		return nil
	}
	if st.BoundTenant == "" {
		return fmt.Errorf("%w: session %s was not started on a tenant's subject; continue it on %s", proto.ErrInvalidTask, st.SessionID, bus.TasksSubject)
	}
	return fmt.Errorf("%w: session %s belongs to another tenant", proto.ErrInvalidTask, st.SessionID)
}

// turnPool is the pool the turn's tools run in: the one the task names, or
// the session's, or the loop's. A tenant-bound task runs only in a pool its
// tenant may use (config.TenantPool): one it names outside them is refused;
// its session's, if the tenant's pools changed since, gives way to the
// tenant's default. An unbound task's publisher is the operator's, trusted
// with any pool.
func (s *Service) turnPool(st *State, task proto.Task) (string, error) {
	var last string
	if st != nil {
		last = st.Pool
	}
	if task.BoundTenant == "" {
		return firstNonEmpty(task.Pool, last, s.cfg.Pool), nil
	}
	cfg := s.deps.Config
	if task.Pool == "" && last != "" {
		if pool, err := cfg.TenantPool(task.BoundTenant, last, s.cfg.Pool); err == nil {
			return pool, nil
		}
	}
	pool, err := cfg.TenantPool(task.BoundTenant, task.Pool, s.cfg.Pool)
	if err != nil {
		return "", fmt.Errorf("%w: %v", proto.ErrInvalidTask, err)
	}
	return pool, nil
}

// toolWorkspace is the folder, under the tool runner's root, the session's
// tools work in: tenants/<tenant>/<workspace> for a tenant-bound session.
func (st *State) toolWorkspace() string {
	if st.BoundTenant == "" {
		return st.Workspace
	}
	return bus.TenantWorkspace(st.BoundTenant, st.Workspace)
}

// subtaskSubject is where the session's child tasks go: the loop's own
// subject, so no other publisher can name a parent; a bound session's
// children are bound to its tenant too.
func (st *State) subtaskSubject() string {
	if st.BoundTenant == "" {
		return bus.SubtasksSubject
	}
	return bus.TenantSubtasks(st.BoundTenant)
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
