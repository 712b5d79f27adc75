package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
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

// The api's time to first token, streamed: from sending the request (or
// publishing the task) to the first piece of the answer — a delta event
// on the session's subject as a NATS client hears it, the first
// response.output_text.delta of a streamed POST /v1/responses, the first
// chunk with content of a streamed POST /v1/chat/completions. Each
// iteration then reads its turn to the end. Reported as ms-to-first-token
// (ns/op is the whole turn).
//
//	go test -run '^$' -bench BenchmarkFirstToken -benchtime 200x ./services/api/
func BenchmarkFirstToken(b *testing.B) {
	h := startHerald(b, "")
	nc, err := nats.Connect(h.NATSURL)
	require.NoError(b, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(b, err)
	const text = "say: The first words arrive before the last ones."

	b.Run("nats", func(b *testing.B) {
		var first time.Duration
		for b.Loop() {
			task := proto.Task{Prompt: text, SessionID: "s-" + uuid.NewString()[:12], TaskID: "t-" + uuid.NewString()}
			events := make(chan *nats.Msg, 256)
			sub, err := nc.ChanSubscribe(bus.SessionEvents(task.SessionID), events)
			require.NoError(b, err)
			start := time.Now()
			require.NoError(b, bus.PublishJSON(context.Background(), js, bus.TasksSubject, "", task))
			seen := false
			for done := false; !done; {
				select {
				case m := <-events:
					var ev proto.Event
					require.NoError(b, json.Unmarshal(m.Data, &ev))
					if ev.Type == proto.EventDelta && !seen {
						first += time.Since(start)
						seen = true
					}
					done = ev.Type == proto.EventResult
				case <-time.After(30 * time.Second):
					b.Fatal("no result")
				}
			}
			require.True(b, seen)
			_ = sub.Unsubscribe()
		}
		b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first-token")
	})
	b.Run("responses_stream", func(b *testing.B) {
		var first time.Duration
		for b.Loop() {
			first += streamUntil(b, h.URL+"/v1/responses", `{"model":"herald","stream":true,"input":"`+text+`"}`,
				func(event, _ string) bool { return event == "response.output_text.delta" })
		}
		b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first-token")
	})
	b.Run("chat_completions_stream", func(b *testing.B) {
		var first time.Duration
		for b.Loop() {
			first += streamUntil(b, h.URL+"/v1/chat/completions",
				`{"model":"herald","stream":true,"messages":[{"role":"user","content":"`+text+`"}]}`,
				func(_, data string) bool {
					var chunk struct {
						Choices []struct {
							Delta struct {
								Content string `json:"content"`
							} `json:"delta"`
						} `json:"choices"`
					}
					return json.Unmarshal([]byte(data), &chunk) == nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != ""
				})
		}
		b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first-token")
	})
}

// streamUntil posts body and reads the SSE answer to its end; it returns
// how long after sending the first event isFirst accepts came.
func streamUntil(b *testing.B, url, body string, isFirst func(event, data string) bool) time.Duration {
	start := time.Now()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(b, err)
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode)
	var first time.Duration
	event := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if first == 0 && isFirst(event, data) {
				first = time.Since(start)
			}
			event = ""
		}
	}
	require.NoError(b, sc.Err())
	require.NotZero(b, first, "no first token in the stream")
	return first
}

// Requests per second the api sustains with many clients at once (16, on
// the machine's cores), one non-streamed POST /v1/responses turn each,
// beside the same turns published on herald.tasks by 16 NATS clients.
// Reported as turns/s.
//
//	go test -run '^$' -bench BenchmarkSustained -benchtime 400x ./services/api/
func BenchmarkSustained(b *testing.B) {
	h := startHerald(b, "")
	nc, err := nats.Connect(h.NATSURL)
	require.NoError(b, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(b, err)
	clients := 16
	perProc := max(1, clients/runtime.GOMAXPROCS(0))
	b.Run("nats", func(b *testing.B) {
		b.SetParallelism(perProc)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				task := proto.Task{Prompt: "say: ok", SessionID: "s-" + uuid.NewString()[:12], TaskID: "t-" + uuid.NewString()}
				sub, err := nc.SubscribeSync(bus.SessionResult(task.SessionID))
				if err != nil {
					b.Error(err)
					return
				}
				if err := bus.PublishJSON(context.Background(), js, bus.TasksSubject, "", task); err != nil {
					b.Error(err)
					return
				}
				if _, err := sub.NextMsg(60 * time.Second); err != nil {
					b.Error(err)
					return
				}
				_ = sub.Unsubscribe()
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
	})
	b.Run("responses", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		b.SetParallelism(perProc)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Post(h.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"herald","input":"say: ok"}`))
				if err != nil {
					b.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d: %s", resp.StatusCode, body)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
	})
}
