package compressor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// modelHop plays the gateway's part on the bus for these tests (services
// never import each other): it takes LLM requests off LLM_REQUESTS, asks
// the scripted model server over real HTTP, and publishes the answer on the
// request's reply subject. The full path through the real gateway is
// covered by the herald binary's end-to-end tests.
type modelHop struct {
	Model *scripted.Server

	mu       sync.Mutex
	requests []*heraldpb.LLMRequest
}

func startModelHop(t testing.TB, b *heraldtest.Bus, script scripted.Script) *modelHop {
	t.Helper()
	srv, err := scripted.Start(script)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	h := &modelHop{Model: srv}
	_, js := b.Connect(t, "model-hop")
	w, err := bus.StartWorker(context.Background(), js, bus.ConsumerSpec{
		Stream: bus.StreamLLMRequests, Durable: "test-model-hop", FilterSubjects: []string{"herald.llm.request.>"},
	}, func(ctx context.Context, msg jetstream.Msg) error { return h.answer(ctx, js, msg) }, heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return h
}

func (h *modelHop) answer(ctx context.Context, js jetstream.JetStream, msg jetstream.Msg) error {
	var req heraldpb.LLMRequest
	if err := bus.Decode(msg.Data(), &req); err != nil {
		return err
	}
	h.mu.Lock()
	h.requests = append(h.requests, &req)
	h.mu.Unlock()
	resp := &heraldpb.LLMResponse{RequestId: req.RequestId, SessionId: req.SessionId}
	content, usage, err := h.complete(ctx, &req)
	resp.Attempts = 1
	if err != nil {
		resp.Error, resp.ErrorClass = err.Error(), "server_error"
	} else {
		resp.Message = &heraldpb.ChatMessage{Role: "assistant", Content: content}
		resp.FinishReason, resp.PromptTokens = "stop", usage.InputTokens
		// Priced as the gateway would at $1 input and $2 output per million.
		resp.Usage, resp.CostUsd = usage, (float64(usage.InputTokens)*1+float64(usage.OutputTokens)*2)/1e6
	}
	return bus.PublishProto(ctx, js, req.ReplySubject, req.RequestId, resp)
}

func (h *modelHop) complete(ctx context.Context, req *heraldpb.LLMRequest) (string, *heraldpb.Usage, error) {
	var msgs []map[string]string
	for _, m := range req.Messages {
		msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content})
	}
	body, _ := json.Marshal(map[string]any{"model": "scripted", "messages": msgs})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.Model.URL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		return "", nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", nil, fmt.Errorf("provider answered %d", res.StatusCode)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || len(out.Choices) == 0 {
		return "", nil, fmt.Errorf("unreadable completion: %v", err)
	}
	return out.Choices[0].Message.Content, &heraldpb.Usage{InputTokens: out.Usage.PromptTokens, OutputTokens: out.Usage.CompletionTokens}, nil
}

func (h *modelHop) Requests() []*heraldpb.LLMRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*heraldpb.LLMRequest(nil), h.requests...)
}
