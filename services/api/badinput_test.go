package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/stretchr/testify/require"
)

func TestOpenAIRoutesRefuseBadInputInOpenAIsShapeAndStartNothing(t *testing.T) {
	svc, js := inProcess(t)
	user := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		header           []string
		status           int
		code             string
	}{
		{"responses: not JSON", "/v1/responses", `{"model":`, nil, 400, "invalid_json"},
		{"responses: unknown field", "/v1/responses", `{"model":"m","input":"hi","inptu":"x"}`, nil, 400, "invalid_json"},
		{"responses: no input", "/v1/responses", `{"model":"m"}`, nil, 400, "missing_input"},
		{"responses: empty input", "/v1/responses", `{"model":"m","input":"  "}`, nil, 400, "missing_input"},
		{"responses: input a number", "/v1/responses", `{"model":"m","input":5}`, nil, 400, "invalid_input"},
		{"responses: empty list", "/v1/responses", `{"model":"m","input":[]}`, nil, 400, "invalid_input"},
		{"responses: client tools", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}`, nil, 400, "tools_unsupported"},
		{"responses: tool_choice", "/v1/responses", `{"model":"m","input":"hi","tool_choice":"required"}`, nil, 400, "tools_unsupported"},
		{"responses: function output item", "/v1/responses", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`, nil, 400, "tools_unsupported"},
		{"responses: image part", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, nil, 400, "unsupported_content"},
		{"responses: last not user", "/v1/responses", `{"model":"m","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, nil, 400, "invalid_messages"},
		{"responses: bad effort", "/v1/responses", `{"model":"m","input":"hi","reasoning":{"effort":"max"}}`, nil, 400, "invalid_reasoning"},
		{"responses: metadata", "/v1/responses", `{"model":"m","input":"hi","metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, nil, 400, "invalid_metadata"},
		{"responses: background", "/v1/responses", `{"model":"m","input":"hi","background":true}`, nil, 400, "unsupported_parameter"},
		{"responses: unknown previous", "/v1/responses", `{"model":"m","input":"hi","previous_response_id":"resp_nope"}`, nil, 404, "not_found"},
		{"responses: odd previous", "/v1/responses", `{"model":"m","input":"hi","previous_response_id":"../x"}`, nil, 404, "not_found"},
		{"chat: not JSON", "/v1/chat/completions", `[`, nil, 400, "invalid_json"},
		{"chat: no messages", "/v1/chat/completions", `{"model":"m","messages":[]}`, nil, 400, "invalid_messages"},
		{"chat: last is system", "/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, nil, 400, "invalid_messages"},
		{"chat: tool message", "/v1/chat/completions", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":"x"},{"role":"user","content":"hi"}]}`, nil, 400, "tools_unsupported"},
		{"chat: odd role", "/v1/chat/completions", `{"model":"m","messages":[{"role":"wizard","content":"x"},{"role":"user","content":"hi"}]}`, nil, 400, "invalid_messages"},
		{"chat: tools", "/v1/chat/completions", `{"model":"m",` + user + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, nil, 400, "tools_unsupported"},
		{"chat: functions", "/v1/chat/completions", `{"model":"m",` + user + `,"functions":[{"name":"f"}]}`, nil, 400, "tools_unsupported"},
		{"chat: n", "/v1/chat/completions", `{"model":"m",` + user + `,"n":2}`, nil, 400, "unsupported_parameter"},
		{"chat: json schema", "/v1/chat/completions", `{"model":"m",` + user + `,"response_format":{"type":"json_schema"}}`, nil, 400, "unsupported_parameter"},
		{"chat: content object", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":{"a":1}}]}`, nil, 400, "invalid_content"},
		{"chat: empty user", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":""}]}`, nil, 400, "invalid_messages"},
		{"chat: session header", "/v1/chat/completions", `{"model":"m",` + user + `}`, []string{"X-Herald-Session", "a.b>"}, 400, "invalid_session"},
		{"chat: unknown field", "/v1/chat/completions", `{"model":"m",` + user + `,"temprature":1}`, nil, 400, "invalid_json"},
		{"chat: huge", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 400<<10) + `"}]}`, nil, 413, "request_too_large"},
		{"responses: GET unknown", "/v1/responses/resp_nope", ``, nil, 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := "POST"
			if c.body == "" {
				method = "GET"
			}
			rec := serve(svc, "127.0.0.1:9", "", method, c.path, c.body, c.header...)
			require.Equal(t, c.status, rec.Code, rec.Body.String())
			require.Equal(t, c.code, errorCode(t, rec))
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		})
	}
	ctx := context.Background()
	s, err := js.Stream(ctx, bus.StreamTasks)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "no refused request published a task")
	kv, err := js.KeyValue(ctx, bus.BucketAPIRuns)
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Values(), "nor recorded a run")
	rec := serve(svc, "127.0.0.1:9", "", "DELETE", "/v1/runs", "")
	require.Equal(t, http.StatusNotFound, rec.Code)
}
