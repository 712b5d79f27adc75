package scripted

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A lean server answers byte for byte as a full one, keeps no request, and
// its script still sees the roles it counts.
func TestALeanServerAnswersAsAFullOneAndKeepsNothing(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	script := func(r *Request) Reply {
		roles := make([]string, len(r.Messages))
		for i, m := range r.Messages {
			roles[i] = m.Role
		}
		mu.Lock()
		seen = append(seen, strings.Join(roles, ","))
		mu.Unlock()
		if r.AssistantCount() == 0 {
			return Tool("read_file", `{"path":"a.txt"}`)
		}
		return Text("done")
	}
	full, err := Start(script)
	require.NoError(t, err)
	defer full.Close()
	lean, err := StartLean(script)
	require.NoError(t, err)
	defer lean.Close()

	created := regexp.MustCompile(`"created":\d+`)
	post := func(s *Server, body string) string {
		resp, err := http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return created.ReplaceAllString(string(data), `"created":0`)
	}
	first := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"type":"function","function":{"name":"read_file"}}]}`
	second := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_0_0","type":"function","function":{"name":"read_file","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_0_0","content":"1|x"}]}`
	for _, body := range []string{first, second} {
		want := post(full, body)
		require.Equal(t, want, post(lean, body))
	}
	require.Contains(t, post(lean, first), `"tool_calls"`)
	require.Contains(t, post(lean, second), "data: [DONE]")

	resp, err := http.Post(lean.URL+"/chat/completions", "application/json", strings.NewReader(`{"messages":[`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	require.Len(t, full.Requests(), 2)
	require.Empty(t, lean.Requests())
	require.Equal(t, 4, lean.Calls())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"system,user", "system,user", "user,assistant,tool", "user,assistant,tool",
		"system,user", "user,assistant,tool"}, seen)
}
