package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
)

func TestOpenAIGoSDK(t *testing.T) {
	h := startHerald(t, "")
	client := openai.NewClient(option.WithBaseURL(h.URL+"/v1/"), option.WithAPIKey("ignored-on-loopback-without-keys"),
		option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "herald",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say: Go says hello.")}})
	require.NoError(t, err)
	require.Equal(t, "Go says hello.", first.OutputText())
	require.Equal(t, responses.ResponseStatusCompleted, first.Status)
	require.Positive(t, first.Usage.TotalTokens)

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "herald",
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("say: And streams it.")},
		PreviousResponseID: openai.String(first.ID)})
	var deltas strings.Builder
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			done = ev.Response
		}
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "And streams it.", deltas.String())
	require.Equal(t, "And streams it.", done.OutputText())
	require.Equal(t, []string{"say: Go says hello.", "say: And streams it."}, userMessages(t, h.model, "And streams it."))

	got, err := client.Responses.Get(ctx, done.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, "And streams it.", got.OutputText())

	var raw *http.Response
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "herald",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say: Chat from Go.")}}, option.WithResponseInto(&raw))
	require.NoError(t, err)
	require.Equal(t, "Chat from Go.", chat.Choices[0].Message.Content)
	session := raw.Header.Get("X-Herald-Session")
	require.NotEmpty(t, session)

	chunks := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "herald",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say: More from Go.")}},
		option.WithHeader("X-Herald-Session", session))
	var acc openai.ChatCompletionAccumulator
	for chunks.Next() {
		acc.AddChunk(chunks.Current())
	}
	require.NoError(t, chunks.Err())
	require.Equal(t, "More from Go.", acc.Choices[0].Message.Content)
	require.Equal(t, []string{"say: Chat from Go.", "say: More from Go."}, userMessages(t, h.model, "More from Go."))

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "herald",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
		Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "f"})}})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Equal(t, "tools_unsupported", apiErr.Code)
}
