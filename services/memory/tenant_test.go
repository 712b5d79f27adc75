package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// taggedTranscript stores a session's messages as the loop does, naming the
// session's tenant ("" as a loop before tenants were recorded).
func taggedTranscript(t *testing.T, b *heraldtest.Bus, sid, tenant string, msgs ...*heraldpb.ChatMessage) {
	t.Helper()
	for i, m := range msgs {
		e := &heraldpb.TranscriptEntry{SessionId: sid, Index: int32(i), Message: m, TsUnixMs: time.Now().UnixMilli(), Tenant: tenant}
		require.NoError(t, bus.PublishProto(context.Background(), b.JS, bus.SessionLog(sid), fmt.Sprintf("%s:log:%d", sid, i), e))
	}
}

// searchAs runs session_search from a session of tenant; bound makes it a
// tenant-bound session (its workspace under tenants/<tenant>).
func searchAs(t *testing.T, b *heraldtest.Bus, tenant string, bound bool, query string) []string {
	t.Helper()
	sid, callID := "s-"+tenant, fmt.Sprintf("q%d", time.Now().UnixNano())
	args, _ := json.Marshal(map[string]any{"query": query})
	req := &heraldpb.ToolCallRequest{CallId: callID, SessionId: sid, TaskId: "t", Tenant: tenant, Tool: ToolSessionSearch, Arguments: string(args)}
	if bound {
		req.Workspace = bus.TenantWorkspace(tenant, "")
	}
	require.NoError(t, bus.PublishProto(context.Background(), b.JS, bus.MemoryCall(sid), sid+":"+callID, req))
	o := decodeOutcome(t, waitResult(t, b.JS, sid, callID))
	require.True(t, o.Success, o.Error)
	var sessions []string
	for _, h := range o.Results {
		sessions = append(sessions, h.SessionID)
	}
	return sessions
}

func TestSessionSearchShowsATenantItsOwnSessionsOnly(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, testConfig(t), "mem-1")
	taggedTranscript(t, b, "acme-1", "acme", conversation("the zanzibar rollout")...)
	taggedTranscript(t, b, "globex-1", "globex", conversation("the zanzibar audit")...)
	taggedTranscript(t, b, "legacy-1", "", conversation("the zanzibar budget")...)

	require.Eventually(t, func() bool {
		return len(searchAs(t, b, "acme", false, "zanzibar")) == 2
	}, wait, 20*time.Millisecond)
	require.ElementsMatch(t, []string{"acme-1", "legacy-1"}, searchAs(t, b, "acme", false, "zanzibar"),
		"an unbound session sees its tenant's sessions and those recorded before tenants were")
	require.Equal(t, []string{"acme-1"}, searchAs(t, b, "acme", true, "zanzibar"))
	require.Equal(t, []string{"globex-1"}, searchAs(t, b, "globex", true, "zanzibar"))
	require.Equal(t, []string{"globex-1"}, searchAs(t, b, "globex", true, ""), "recent sessions are scoped too")
}
