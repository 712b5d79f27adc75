package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

func TestMalformedTaskIsDeadLetteredAndTheNextTaskRuns(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Text("hello")))
	for _, bad := range []string{`{"prompt": `, `{"session_id":"x"}`, `{"prompt":"hi","colour":"blue"}`, `{"prompt":"hi","session_id":"a.b"}`} {
		require.NoError(t, h.NC.Publish(bus.TasksSubject, []byte(bad)))
	}
	res := h.Run(NewTask("say hello"))
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "hello", res.FinalResponse)
	var dead []string
	require.Eventually(t, func() bool {
		dead = nil
		for _, m := range heraldtest.DeadLetters(t, h.JS, bus.StreamTasks) {
			dead = append(dead, m.Header.Get(bus.HeaderError))
			require.Equal(t, bus.TasksSubject, m.Header.Get(bus.HeaderSubject))
		}
		return len(dead) == 4
	}, 10*time.Second, 20*time.Millisecond)
	all := strings.Join(dead, "\n")
	require.Contains(t, all, "not a JSON task object")
	require.Contains(t, all, `"prompt" is required`)
	require.Contains(t, all, `unknown field "colour"`)
	require.Contains(t, all, `"session_id" may hold only`)
}

func TestReadFileOutsideTheWorkspaceIsRefused(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("read_file", `{"path":"../../../../etc/passwd"}`),
		scripted.Tool("read_file", `{"path":"/etc/passwd"}`),
		scripted.Text("I could not read it."),
	))
	task := NewTask("show me /etc/passwd")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	msgs := h.Transcript(task.SessionID)
	var tools []string
	for _, m := range msgs {
		if m.Role == "tool" {
			tools = append(tools, m.Content)
		}
	}
	require.Len(t, tools, 2)
	for _, content := range tools {
		require.NotContains(t, content, "root:", "no byte of the file outside the workspace reaches the model")
		require.Contains(t, strings.ToLower(content), "outside the workspace")
	}
}
