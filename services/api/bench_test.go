package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The api's added latency: one turn (a one-line scripted answer) through
// POST /v1/responses, through POST /v1/chat/completions, and the same turn
// published on herald.tasks with the result awaited on its subject, as a
// NATS client does it. Each against a `herald up` process.
//
//	go test -run '^$' -bench . -benchtime 200x ./services/api/
func BenchmarkTurn(b *testing.B) {
	h := startHerald(b, "")
	nc, err := nats.Connect(h.NATSURL)
	require.NoError(b, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(b, err)

	b.Run("nats", func(b *testing.B) {
		for b.Loop() {
			task := proto.Task{Prompt: "say: ok", SessionID: "s-" + uuid.NewString()[:12], TaskID: "t-" + uuid.NewString()}
			sub, err := nc.SubscribeSync(bus.SessionResult(task.SessionID))
			require.NoError(b, err)
			require.NoError(b, bus.PublishJSON(context.Background(), js, bus.TasksSubject, "", task))
			_, err = sub.NextMsg(30 * time.Second)
			require.NoError(b, err)
			_ = sub.Unsubscribe()
		}
	})
	b.Run("responses", func(b *testing.B) {
		for b.Loop() {
			post(b, h.URL+"/v1/responses", `{"model":"herald","input":"say: ok"}`)
		}
	})
	b.Run("chat_completions", func(b *testing.B) {
		for b.Loop() {
			post(b, h.URL+"/v1/chat/completions", `{"model":"herald","messages":[{"role":"user","content":"say: ok"}]}`)
		}
	})
}

func post(b *testing.B, url, body string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(b, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(b, http.StatusOK, resp.StatusCode, "%v", out)
}
