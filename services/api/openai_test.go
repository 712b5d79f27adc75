package api_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// nodeSDK installs the official openai package from npm once into a cache
// folder and returns the folder its node_modules is in.
func nodeSDK(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	dir := filepath.Join(cache, "herald-openai-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err == nil {
		return dir
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private":true}`), 0o644))
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "openai@6")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm install openai: %s", out)
	return dir
}

// userMessages are the user messages of the model request whose last user
// message contains marker.
func userMessages(t *testing.T, model *scripted.Server, marker string) []string {
	t.Helper()
	for _, r := range model.Requests() {
		var users []string
		for _, m := range r.Messages {
			if m.Role == "user" {
				users = append(users, m.Text())
			}
		}
		if len(users) > 0 && strings.Contains(users[len(users)-1], marker) {
			return users
		}
	}
	t.Fatalf("no model request asked %q", marker)
	return nil
}

func TestOfficialNodeSDK(t *testing.T) {
	dir := nodeSDK(t)
	h := startHerald(t, "")
	out, _, code := h.cli(t, "keys", "create", "--tenant", "sdk")
	require.Equal(t, 0, code)
	script, err := filepath.Abs("testdata/openai_sdk.mjs")
	require.NoError(t, err)
	// The script runs from the cache folder so that `import 'openai'` finds it.
	runDir := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(runDir, "node_modules")))
	data, err := os.ReadFile(script)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(runDir, "sdk.mjs"), data, 0o644))
	cmd := exec.Command("node", "sdk.mjs")
	cmd.Dir = runDir
	cmd.Env = append(os.Environ(), "HERALD_URL="+h.URL, "HERALD_KEY="+strings.TrimSpace(out))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan struct{})
	time.AfterFunc(2*time.Minute, func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
		}
	})
	stdout, err := cmd.Output()
	close(done)
	require.NoError(t, err, "node: %s", stderr.String())

	var got struct {
		R1 struct {
			ID, Object, Status, Text, Session string
			Usage                             struct {
				InputTokens        int64 `json:"input_tokens"`
				OutputTokens       int64 `json:"output_tokens"`
				TotalTokens        int64 `json:"total_tokens"`
				InputTokensDetails struct {
					CachedTokens *int64 `json:"cached_tokens"`
				} `json:"input_tokens_details"`
				OutputTokensDetails struct {
					ReasoningTokens *int64 `json:"reasoning_tokens"`
				} `json:"output_tokens_details"`
			}
			Metadata map[string]string
		}
		Stream struct {
			Events    [][2]any
			Deltas    string
			Completed string
			Status    string
		}
		R2        struct{ ID, Text, Session, Previous string }
		Retrieved struct{ ID, Text, Status string }
		Chat      struct {
			Object, Text, Finish, Session string
			Usage                         map[string]any
		}
		ChatStream struct {
			Text, Finish string
			Usage        map[string]any
		}
		Tools struct {
			Status     int
			Code, Type string
		}
	}
	require.NoError(t, json.Unmarshal(stdout, &got), "stdout: %s", stdout)

	require.Equal(t, "response", got.R1.Object)
	require.Equal(t, "completed", got.R1.Status)
	require.Equal(t, "The capital of France is Paris.", got.R1.Text, "output_text, as the SDK reads it")
	require.Positive(t, got.R1.Usage.InputTokens)
	require.Positive(t, got.R1.Usage.OutputTokens)
	require.Equal(t, got.R1.Usage.InputTokens+got.R1.Usage.OutputTokens, got.R1.Usage.TotalTokens)
	require.NotNil(t, got.R1.Usage.InputTokensDetails.CachedTokens)
	require.NotNil(t, got.R1.Usage.OutputTokensDetails.ReasoningTokens)
	require.Equal(t, map[string]string{"case": "one"}, got.R1.Metadata)

	var types []string
	for i, ev := range got.Stream.Events {
		types = append(types, ev[0].(string))
		require.EqualValues(t, i, ev[1], "sequence numbers count from 0")
	}
	require.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}, types[:4])
	require.Equal(t, []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}, types[len(types)-4:])
	require.Contains(t, types, "response.output_text.delta")
	require.Equal(t, "Streamed through Herald.", got.Stream.Deltas)
	require.Equal(t, "Streamed through Herald.", got.Stream.Completed)

	require.Equal(t, got.R1.Session, got.R2.Session, "previous_response_id continues the session")
	require.Equal(t, got.R1.ID, got.R2.Previous)
	require.Equal(t, []string{"say: The capital of France is Paris.", "what did I ask?"}, userMessages(t, h.model, "what did I ask?"),
		"the model saw the earlier turn")
	require.Equal(t, got.R1.ID, got.Retrieved.ID)
	require.Equal(t, "The capital of France is Paris.", got.Retrieved.Text)

	require.Equal(t, "chat.completion", got.Chat.Object)
	require.Equal(t, "Chat through Herald.", got.Chat.Text)
	require.Equal(t, "stop", got.Chat.Finish)
	require.NotEmpty(t, got.Chat.Session, "the session is in the X-Herald-Session header")
	require.Positive(t, got.Chat.Usage["prompt_tokens"])
	require.Equal(t, "Streamed chat.", got.ChatStream.Text)
	require.Equal(t, "stop", got.ChatStream.Finish)
	require.Positive(t, got.ChatStream.Usage["completion_tokens"])
	require.Equal(t, []string{"say: Chat through Herald.", "say: Streamed chat."}, userMessages(t, h.model, "Streamed chat."),
		"X-Herald-Session continued the chat's session")

	require.Equal(t, 400, got.Tools.Status)
	require.Equal(t, "tools_unsupported", got.Tools.Code)
	require.Equal(t, "invalid_request_error", got.Tools.Type)
}
