package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	redaction "github.com/heraldrun/herald/pkg/redact"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// ProbeTool is the one tool a probe offers the model and asks it to call.
const ProbeTool = "herald_doctor_ping"

const probeSchema = `{"type":"object","properties":{"echo":{"type":"string","description":"the word to echo"}},"required":["echo"]}`

const probePrompt = `This is a connectivity check. Call the tool ` + ProbeTool + ` with {"echo":"ok"} and nothing else.`

// ProbeReport is what one tiny streamed request to a provider showed
// (herald doctor). It never holds the key.
type ProbeReport struct {
	Provider string
	Model    string
	Mode     string
	// Class is the failure's error class, "" when the call succeeded.
	Class  ErrorClass
	Detail string
	// ToolCall: the probe tool came back called with JSON arguments.
	ToolCall bool
	Usage    *heraldpb.Usage
	// PriceSource is config, builtin or unknown.
	PriceSource string
	Latency     time.Duration
}

// Probe sends provider p one streamed request offering ProbeTool, through
// the same client (and provider profile) the gateway serves calls with.
func Probe(ctx context.Context, p config.Provider, pricing map[string]config.Price, profiles map[string]config.ProviderProfile) ProbeReport {
	_, source := NewPricer(pricing).Lookup(p.Model)
	rep := ProbeReport{Provider: p.Provider, Model: p.Model, PriceSource: source}
	ep, err := newEndpoint(p, 0, profiles)
	if err != nil {
		rep.Class, rep.Detail = ClassFormatError, err.Error()
		return rep
	}
	rep.Provider, rep.Mode = ep.provider, ep.mode
	call := modelCall{model: p.Model, maxOut: 64, stream: true, onDelta: func(string) {},
		messages: []*heraldpb.ChatMessage{{Role: "user", Content: probePrompt}},
		tools:    []*heraldpb.ToolSpec{{Name: ProbeTool, Description: "Echo a word back.", ParametersJson: probeSchema}}}
	start := time.Now()
	ans, err := newModelClient(ep, newHTTPClient(DefaultStreamIdleTimeout, 1)).complete(ctx, call)
	rep.Latency = time.Since(start)
	if err != nil {
		ae := classify(err)
		rep.Class, rep.Detail = ae.class, redactKey(ae.Error(), p.APIKey)
		return rep
	}
	rep.Usage = ans.usage
	for _, tc := range ans.message.GetToolCalls() {
		rep.ToolCall = rep.ToolCall || tc.GetName() == ProbeTool && json.Valid([]byte(tc.GetArguments()))
	}
	return rep
}

// redactKey removes the key, any run of 12 or more of its characters, and
// any run of it a provider echoes back masked in the middle (OpenAI's
// "Incorrect API key provided: sk-ab***yz"), from a message.
func redactKey(msg, key string) string {
	if key == "" {
		return msg
	}
	msg = redaction.New(key).Replace(msg, "[key]")
	for _, word := range strings.Fields(msg) {
		if strings.Contains(word, "*") && len(word) > 6 && strings.HasPrefix(key, word[:3]) {
			msg = strings.ReplaceAll(msg, word, "[key]")
		}
	}
	return msg
}
