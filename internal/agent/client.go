// Package agent runs sub-agents: a model client for OpenAI's
// chat-completions API (and the servers that copy it: Ollama, vLLM,
// DeepSeek, Qwen's compatible mode), the loop that lets a model use tools
// until it answers, and the manager that keeps the tasks.
package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
)

// Message is one chat message, in the shape the API takes and returns.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is DeepSeek's chain of thought. In its thinking mode
	// with tools the API wants it back in the assistant message it came
	// with; other servers ignore the field.
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
}

// ToolCall is one call a model asks for. Arguments is always a JSON text
// (possibly invalid, as the model wrote it), never empty.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function member of a ToolCall.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Reply is one normalised model reply.
type Reply struct {
	Message      Message
	FinishReason string // informative only: servers say "stop" with tool calls present
}

// ClientOptions configure a Client.
type ClientOptions struct {
	BaseURL string // e.g. http://localhost:11434/v1; /chat/completions is appended
	APIKey  string // sent as a bearer token when set; never logged or returned
	Model   string
	// Timeout bounds one request (each retry gets its own, within ctx).
	Timeout time.Duration
	// MaxRetries is how many times a 429 or 5xx reply or a failed
	// connection is retried; default 3.
	MaxRetries int
	// HTTP is the client used; default a plain one. The model endpoint is
	// chosen by the operator, and local models on loopback are the common
	// case, so it does not go through the network guard the tools use.
	HTTP *http.Client
	// Backoff is the wait before retry n (1, 2...) when the server names
	// none; default 1s, 2s, 4s... capped at 30s.
	Backoff func(n int) time.Duration
	// Sleep waits d or until ctx is done; default a timer. Tests record
	// the waits instead of taking them.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client talks to one chat-completions endpoint.
type Client struct {
	opts     ClientOptions
	endpoint string
}

// maxReplyBytes bounds what is read of one reply.
const maxReplyBytes = 16 << 20

// maxRetryAfter caps a server's Retry-After: a longer wait is not worth
// holding a sub-agent for.
const maxRetryAfter = 2 * time.Minute

// NewClient returns a client for the endpoint in opts.
func NewClient(opts ClientOptions) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 3
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{}
	}
	if opts.Backoff == nil {
		opts.Backoff = func(n int) time.Duration {
			return min(time.Second<<(n-1), 30*time.Second)
		}
	}
	if opts.Sleep == nil {
		opts.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
	return &Client{opts: opts, endpoint: strings.TrimRight(opts.BaseURL, "/") + "/chat/completions"}
}

// Model returns the model name the client asks for.
func (c *Client) Model() string { return c.opts.Model }

// StatusError is a reply with an HTTP status other than 200, after the
// retries. Body is the start of the server's message.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("model API answered HTTP %d: %s", e.Status, e.Body)
}

type chatRequest struct {
	Model    string                `json:"model"`
	Messages []Message             `json:"messages"`
	Tools    []registry.Definition `json:"tools,omitempty"`
	Stream   bool                  `json:"stream"`
}

// Chat sends the conversation and the tools and returns the model's reply,
// normalised. 429 and 5xx replies and failed connections are retried up to
// MaxRetries times, honouring Retry-After, as long as ctx leaves time.
func (c *Client) Chat(ctx context.Context, msgs []Message, tools []registry.Definition) (Reply, error) {
	body, err := json.Marshal(chatRequest{Model: c.opts.Model, Messages: msgs, Tools: tools})
	if err != nil {
		return Reply{}, err
	}
	for attempt := 0; ; attempt++ {
		reply, wait, err := c.once(ctx, body)
		if err == nil {
			return reply, nil
		}
		if wait < 0 || attempt >= c.opts.MaxRetries || ctx.Err() != nil {
			return Reply{}, err
		}
		if wait == 0 {
			wait = c.opts.Backoff(attempt + 1)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return Reply{}, fmt.Errorf("%w (the server asked to retry after %s, past the task's deadline)", err, wait.Round(time.Second))
		}
		if err := c.opts.Sleep(ctx, wait); err != nil {
			return Reply{}, err
		}
	}
}

// once makes one request. wait < 0: the error is final; otherwise it may
// be retried after wait (0: the client's own backoff).
func (c *Client) once(ctx context.Context, body []byte) (Reply, time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Reply{}, -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, -1, ctx.Err()
		}
		if errors.Is(rctx.Err(), context.DeadlineExceeded) {
			return Reply{}, 0, fmt.Errorf("model API did not answer within %s", c.opts.Timeout)
		}
		return Reply{}, 0, fmt.Errorf("model API unreachable: %w", unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, -1, ctx.Err()
		}
		return Reply{}, 0, fmt.Errorf("reading the model's reply: %w", unwrapURL(err))
	}
	if resp.StatusCode != http.StatusOK {
		se := &StatusError{Status: resp.StatusCode, Body: snippet(data)}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return Reply{}, retryAfter(resp.Header.Get("Retry-After")), se
		}
		return Reply{}, -1, se
	}
	if len(data) > maxReplyBytes {
		return Reply{}, -1, fmt.Errorf("the model's reply is larger than %d bytes", maxReplyBytes)
	}
	reply, err := parseReply(data)
	if err != nil {
		return Reply{}, -1, err
	}
	return reply, 0, nil
}

// unwrapURL drops the *url.Error wrapper, whose text repeats the endpoint.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// retryAfter reads a Retry-After header: seconds or an HTTP date. Absent or
// unreadable: 0 (the client's backoff); beyond maxRetryAfter: capped.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		d = time.Duration(n * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	if d <= 0 {
		return time.Millisecond // "retry now", not "use the backoff"
	}
	return min(d, maxRetryAfter)
}

// snippet is the start of a reply body, for an error message.
func snippet(data []byte) string {
	return runes.Shorten(strings.TrimSpace(string(data)), 500)
}

// wireReply is a chat-completions reply, loose where servers differ.
type wireReply struct {
	Choices []struct {
		Message struct {
			Role             string          `json:"role"`
			Content          json.RawMessage `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// parseReply normalises what servers differ in: content null, a string or
// a list of text parts; tool calls without id or type; arguments as a JSON
// text, as a JSON object, or "" (meaning {}).
func parseReply(data []byte) (Reply, error) {
	var w wireReply
	if err := json.Unmarshal(data, &w); err != nil {
		return Reply{}, fmt.Errorf("the model's reply is not chat-completions JSON: %w: %s", err, snippet(data))
	}
	if w.Error != nil && len(w.Choices) == 0 {
		return Reply{}, fmt.Errorf("model API error: %s", w.Error.Message)
	}
	if len(w.Choices) == 0 {
		return Reply{}, fmt.Errorf("the model's reply has no choices: %s", snippet(data))
	}
	ch := w.Choices[0]
	m := Message{Role: "assistant", Content: contentText(ch.Message.Content)}
	if ch.Message.ReasoningContent != nil {
		m.ReasoningContent = *ch.Message.ReasoningContent
	}
	for i, tc := range ch.Message.ToolCalls {
		call := ToolCall{ID: tc.ID, Type: tc.Type, Function: FunctionCall{Name: tc.Function.Name, Arguments: argumentsText(tc.Function.Arguments)}}
		if call.Type == "" {
			call.Type = "function"
		}
		if call.ID == "" {
			call.ID = newCallID(i)
		}
		m.ToolCalls = append(m.ToolCalls, call)
	}
	return Reply{Message: m, FinishReason: ch.FinishReason}, nil
}

// contentText turns content (null, a string, or [{"type":"text","text"}])
// into text.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

// argumentsText returns a tool call's arguments as JSON text: a JSON
// string is unquoted ("" and null become {}), an object is kept as it is.
func argumentsText(raw json.RawMessage) string {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return "{}"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return "{}"
		}
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return t
}

func newCallID(i int) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("call_%d_%s", i, hex.EncodeToString(b[:]))
}
