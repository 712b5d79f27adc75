package scripted

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Message is a chat message as the server received it.
type Message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	ToolCalls  []WireCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	Reasoning  string     `json:"reasoning_content,omitempty"`
}

// Text returns the message content as plain text (string or content parts).
func (m Message) Text() string {
	switch c := m.Content.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if part, ok := p.(map[string]any); ok {
				if s, ok := part["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

// WireCall is a tool call in OpenAI wire form.
type WireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Request is one request the server received.
type Request struct {
	Path     string
	Header   http.Header
	Model    string            `json:"model"`
	Messages []Message         `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Stream   bool              `json:"stream"`
	Raw      []byte            `json:"-"`
	// Arrived is when the request came; InFlight how many requests the
	// server was answering then, this one included.
	Arrived  time.Time `json:"-"`
	InFlight int       `json:"-"`
}

// AssistantCount is how many assistant messages the history holds.
func (r *Request) AssistantCount() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// FirstUser is the first user message's text: the conversation's key.
func (r *Request) FirstUser() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Text()
		}
	}
	return ""
}

// LastMessage returns the last message of the history.
func (r *Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// Call is a tool call a Reply asks for.
type Call struct {
	ID   string
	Name string
	Args string
}

// Usage overrides the token counts the server reports.
type Usage struct {
	// PromptTokens counts every input token, cached and cache-written included.
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	ReasoningTokens  int64
	// CacheWriteTokens are input tokens written to the prompt cache
	// (Anthropic's cache_creation_input_tokens).
	CacheWriteTokens int64
}

// Reply is what the server answers to one request.
type Reply struct {
	Content      string
	Reasoning    string
	ToolCalls    []Call
	FinishReason string // default: tool_calls when there are calls, else stop
	Usage        *Usage // default: estimated from the request and reply sizes
	// Status, when not 0 or 200, answers with this HTTP status and Body.
	Status int
	Body   string
	Header map[string]string
	// Raw replaces the whole response body (e.g. invalid JSON), status 200.
	Raw string
	// ContentType of Raw: application/json unless set (text/event-stream
	// replays a recorded stream byte for byte).
	ContentType string
	// Delay waits before answering (the client's cancellation ends it early).
	Delay time.Duration
	// ChunkChars splits streamed content into chunks of this many characters.
	ChunkChars int
	// CutAfter drops the connection mid-answer: after this many streamed
	// events, or (not streaming) half-way through the JSON body.
	CutAfter int
	// StallAfter makes a stream go silent after this many events, until the
	// client gives up.
	StallAfter int
	// Signature is the signature of the Anthropic thinking block of
	// Reasoning ("scripted-signature" when empty), and the encrypted content
	// of the Responses API reasoning item (none when empty).
	Signature string
	// RedactedThinking adds an Anthropic redacted_thinking block with this data.
	RedactedThinking string
	// Done, when set, is called once the reply is answered (or the client
	// gave up during its Delay): a script counting its own requests in
	// flight counts the Delay as the model's time.
	Done func()
}

// Text is a reply with content only.
func Text(s string) Reply { return Reply{Content: s} }

// Tool is a reply calling one tool.
func Tool(name, args string) Reply { return Reply{ToolCalls: []Call{{Name: name, Args: args}}} }

// Script chooses the reply to a request.
type Script func(r *Request) Reply

// Server is a running scripted model server.
type Server struct {
	URL string // base URL ending in /v1

	srv    *http.Server
	ln     net.Listener
	script Script

	// lean keeps no request and decodes only what a load run's script
	// reads (StartLean).
	lean bool

	mu       sync.Mutex
	requests []*Request
	calls    int
	inflight int
}

// Start serves script on a loopback port.
func Start(script Script) (*Server, error) { return start(script, false) }

func start(script Script, lean bool) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	s := &Server{ln: ln, script: script, lean: lean, URL: "http://" + ln.Addr().String() + "/v1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.serve(chatAPI))
	mux.HandleFunc("/v1/responses", s.serve(responsesAPI))
	mux.HandleFunc("/v1/messages", s.serve(anthropicAPI))
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"scripted","object":"model"}]}`)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// StartLean serves script as Start does, for load runs, where the server
// stands in for a remote provider whose work is on another machine: it keeps
// no request (Requests returns none; Calls still counts them) and of a chat
// completions request decodes only the model, the stream flag and each
// message's role, so the script sees Messages holding roles alone (and no
// Header: the request's headers are not copied either). Decoding
// every request whole was a fifth of this server's CPU, and holding them all
// grew its heap all run, on the cores the client it stands in for runs on
// (docs/BENCHMARKS.md). The answers on the wire are the same as Start's.
func StartLean(script Script) (*Server, error) { return start(script, true) }

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

// SetScript replaces the script for later requests.
func (s *Server) SetScript(script Script) {
	s.mu.Lock()
	s.script = script
	s.mu.Unlock()
}

// Requests returns every request received so far, oldest first.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Calls is how many requests arrived.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// wireAPI is one provider protocol the server speaks: how a request body
// becomes a Request, and how a Reply is written as JSON or as a stream.
type wireAPI struct {
	parse func(body []byte, req *Request) error
	// lean, when set, is parse for a lean server: only the model, the
	// stream flag and the messages' roles.
	lean   func(body []byte, req *Request) error
	object func(req *Request, reply Reply) any
	stream func(w http.ResponseWriter, req *Request, reply Reply)
}

var chatAPI = wireAPI{
	parse:  func(body []byte, req *Request) error { return json.Unmarshal(body, req) },
	lean:   parseChatRoles,
	object: func(req *Request, reply Reply) any { return completion(req, reply) },
	stream: writeStream,
}

func (s *Server) serve(api wireAPI) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &Request{Path: r.URL.Path, Raw: body}
		parse := api.parse
		if s.lean && api.lean != nil {
			parse = api.lean
		} else {
			req.Header = r.Header.Clone()
		}
		if err := parse(body, req); err != nil {
			http.Error(w, `{"error":{"message":"invalid JSON body"}}`, http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		if !s.lean {
			s.requests = append(s.requests, req)
		}
		s.calls++
		s.inflight++
		req.Arrived, req.InFlight = time.Now(), s.inflight
		script := s.script
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inflight--
			s.mu.Unlock()
		}()

		reply := script(req)
		if reply.Done != nil {
			defer reply.Done()
		}
		if reply.Delay > 0 {
			select {
			case <-time.After(reply.Delay):
			case <-r.Context().Done():
				return
			}
		}
		for k, v := range reply.Header {
			w.Header().Set(k, v)
		}
		if reply.StallAfter > 0 {
			w = &stallingWriter{ResponseWriter: w, after: reply.StallAfter, done: r.Context().Done()}
		}
		answer(w, api, req, reply)
	}
}

// parseChatRoles decodes of a chat completions request the model, the
// stream flag and each message's role (a lean server's parse).
func parseChatRoles(body []byte, req *Request) error {
	var v struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	req.Model, req.Stream = v.Model, v.Stream
	req.Messages = make([]Message, len(v.Messages))
	for i, m := range v.Messages {
		req.Messages[i].Role = m.Role
	}
	return nil
}

// readBody reads the request's body into one buffer of its declared
// length: io.ReadAll grows its buffer step by step, and on requests of
// tens of kilobytes (a system prompt and every tool's schema) that copying
// was a fifth of this server's CPU, which shares the machine's cores with
// the client it stands in for.
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= 64<<20 {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(r.Body)
}

func answer(w http.ResponseWriter, api wireAPI, req *Request, reply Reply) {
	switch {
	case reply.Status != 0 && reply.Status != http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		_, _ = io.WriteString(w, reply.Body)
	case reply.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		if reply.ContentType != "" {
			w.Header().Set("Content-Type", reply.ContentType)
		}
		_, _ = io.WriteString(w, reply.Raw)
	case req.Stream:
		api.stream(w, req, reply)
	case reply.CutAfter > 0:
		data, _ := json.Marshal(api.object(req, reply))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		_, _ = w.Write(data[:len(data)/2])
		panic(http.ErrAbortHandler)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.object(req, reply))
	}
}

// stallingWriter stops a stream after a number of flushed events and holds
// the connection open, silent, until the client goes away.
type stallingWriter struct {
	http.ResponseWriter
	after   int
	flushed int
	done    <-chan struct{}
}

func (s *stallingWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	s.flushed++
	if s.flushed >= s.after {
		<-s.done
		panic(http.ErrAbortHandler)
	}
}
