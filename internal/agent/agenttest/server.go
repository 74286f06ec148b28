// Package agenttest is a scripted OpenAI-compatible chat-completions server
// on loopback, for tests of the model client, the sub-agent loop and the
// service end to end.
package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request the server received.
type Request struct {
	Header http.Header
	Body   []byte
	// Decoded parts of Body.
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	Messages []json.RawMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// ToolNames returns the names of the tools the request offered.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// Response is what the server answers to one request.
type Response struct {
	Status int // default 200
	Header map[string]string
	Body   string
	// Hang: answer nothing until the client gives up (a slow model).
	Hang bool
	// Chunks, when set, make the answer a stream of server-sent events
	// (text/event-stream): each chunk, a JSON text, as one data line (one
	// that starts with ":" as a comment line),
	// then data: [DONE] unless NoDone. Before chunk i is written, Gate (if
	// set) is called with i, so a test can hold the stream there.
	Chunks []string
	Gate   func(i int)
	NoDone bool
}

// Server answers requests with its script in order; the last step repeats.
type Server struct {
	URL string // base URL, ending in /v1

	mu    sync.Mutex
	steps []func(Request) Response
	n     int
	reqs  []Request
}

// New starts a server running steps; it is closed when the test ends.
func New(t testing.TB, steps ...func(Request) Response) *Server {
	s := &Server{steps: steps}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/v1"
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such route"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req := Request{Header: r.Header.Clone(), Body: body}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	step := s.steps[min(s.n, len(s.steps)-1)]
	s.n++
	s.mu.Unlock()
	resp := step(req)
	if resp.Hang {
		<-r.Context().Done()
		return
	}
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	if resp.Chunks != nil {
		writeStream(w, resp)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	w.WriteHeader(resp.Status)
	_, _ = io.WriteString(w, resp.Body)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reply answers with a fixed response.
func Reply(r Response) func(Request) Response {
	return func(Request) Response { return r }
}

// Message returns a chat-completions reply whose message is the given JSON
// object, with finish_reason.
func Message(message, finishReason string) Response {
	return Response{Body: fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":%d,"model":"fake","choices":[{"index":0,"message":%s,"finish_reason":%q}]}`,
		time.Now().Unix(), message, finishReason)}
}

// Final is a reply with text and no tool call.
func Final(text string) Response {
	c, _ := json.Marshal(text)
	return Message(`{"role":"assistant","content":`+string(c)+`}`, "stop")
}

// Call is a well-formed reply asking for one tool call; args is JSON text.
func Call(id, name, args string) Response {
	a, _ := json.Marshal(args)
	return Message(fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]}`, id, name, a), "tool_calls")
}

// writeStream answers with resp's chunks as server-sent events, flushing
// each.
func writeStream(w http.ResponseWriter, resp Response) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, c := range resp.Chunks {
		if resp.Gate != nil {
			resp.Gate(i)
		}
		if strings.HasPrefix(c, ":") { // a comment line, as a keep-alive
			_, _ = io.WriteString(w, c+"\n\n")
		} else {
			_, _ = io.WriteString(w, "data: "+c+"\n\n")
		}
		_ = rc.Flush()
	}
	if !resp.NoDone {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}

// Chunk is a chat.completion.chunk with one choice: delta (a JSON
// object) and finish_reason (none when "").
func Chunk(delta, finishReason string) string {
	fr := "null"
	if finishReason != "" {
		fr = fmt.Sprintf("%q", finishReason)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"fake","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, fr)
}

// StreamText is a streamed reply of text in the given pieces, as OpenAI
// streams it (https://platform.openai.com/docs/api-reference/chat-streaming).
func StreamText(pieces ...string) Response {
	chunks := []string{Chunk(`{"role":"assistant","content":""}`, "")}
	for _, p := range pieces {
		c, _ := json.Marshal(p)
		chunks = append(chunks, Chunk(`{"content":`+string(c)+`}`, ""))
	}
	return Response{Chunks: append(chunks, Chunk(`{}`, "stop"))}
}

// StreamCall is a streamed reply asking for one tool call, its arguments
// (JSON text) in two pieces, as OpenAI streams it: the first delta has
// the call's index, id, type and name, the later ones its index and a
// piece of the arguments.
func StreamCall(id, name, args string) Response {
	half := len(args) / 2
	a1, _ := json.Marshal(args[:half])
	a2, _ := json.Marshal(args[half:])
	return Response{Chunks: []string{
		Chunk(fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]}`, id, name), ""),
		Chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(a1)+`}}]}`, ""),
		Chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(a2)+`}}]}`, ""),
		Chunk(`{}`, "tool_calls"),
	}}
}
