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
	"sync/atomic"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tracing"
)

// Reply is one normalised model reply.
type Reply struct {
	Message      Message
	FinishReason string // informative only: servers say "stop" with tool calls present
	// ID and Model are the reply's id and model as the endpoint named
	// them; Usage its token counts, when it gave them.
	ID, Model string
	Usage     *Usage
}

// Usage is what a reply says it cost.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// ClientOptions configure a Client.
type ClientOptions struct {
	// BaseURL is e.g. http://localhost:11434/v1; /chat/completions is
	// appended. One that names an Azure OpenAI deployment
	// (/openai/deployments/{d}) is Azure's classic route (see endpointFor).
	BaseURL string
	// APIKey is sent as a bearer token when set (in api-key on Azure's
	// classic route); never logged or returned.
	APIKey string
	Model  string
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
	// Tracer, when set, gives each request to the endpoint (each retry
	// too) a chat span with the reply's token usage. Nil: none.
	Tracer *tracing.Tracer
	// Stream asks for every reply as server-sent chunks (stream: true)
	// and reads it as they come, passing the text on to the sink of the
	// request's context (WithTextSink). Without it, a model that answers
	// that it is served in stream mode only is streamed from then on.
	Stream bool
	// EchoFields names more fields of a reply's message and tool calls
	// to send back with it than the documented few; "*" sends back all.
	EchoFields []string
}

// Client talks to one chat-completions endpoint.
type Client struct {
	opts     ClientOptions
	endpoint string
	echo     echoFilter
	pace     pacer
	// azure: the endpoint is Azure OpenAI's classic route (endpointFor).
	azure bool
	// stream: replies are asked for and read as server-sent chunks, from
	// the start (Stream) or since the model said it is served no other way.
	stream atomic.Bool
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
	c := &Client{opts: opts, echo: newEchoFilter(opts.EchoFields)}
	c.endpoint, c.azure = endpointFor(opts.BaseURL)
	c.stream.Store(opts.Stream)
	return c
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
// MaxRetries times, honouring Retry-After, as long as ctx leaves time; a
// 429 about a spent quota is not, as waiting does not refill it.
func (c *Client) Chat(ctx context.Context, msgs []Message, tools []registry.Definition) (Reply, error) {
	msgs = c.echo.messages(msgs)
	stream := c.stream.Load()
	body, err := json.Marshal(chatRequest{Model: c.opts.Model, Messages: msgs, Tools: tools, Stream: stream})
	if err != nil {
		return Reply{}, err
	}
	for attempt := 0; ; attempt++ {
		if err := c.paced(ctx); err != nil {
			return Reply{}, err
		}
		reply, wait, err := c.once(ctx, body, stream)
		if err == nil {
			return reply, nil
		}
		if !stream && streamOnly(err) {
			// The model is served in stream mode only: from now on this
			// client streams, and this request is made again at once.
			c.stream.Store(true)
			stream, attempt = true, attempt-1
			if body, err = json.Marshal(chatRequest{Model: c.opts.Model, Messages: msgs, Tools: tools, Stream: true}); err != nil {
				return Reply{}, err
			}
			continue
		}
		if wait < 0 || attempt >= c.opts.MaxRetries || ctx.Err() != nil {
			return Reply{}, err
		}
		asked := wait > 0
		if !asked {
			wait = c.opts.Backoff(attempt + 1)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			if asked {
				return Reply{}, fmt.Errorf("%w (the server asked to retry after %s, past the task's deadline)", err, wait.Round(time.Second))
			}
			return Reply{}, fmt.Errorf("%w (not retried: the next attempt, after %s, would be past the task's deadline)", err, wait.Round(time.Second))
		}
		if err := c.opts.Sleep(ctx, wait); err != nil {
			return Reply{}, err
		}
	}
}

// paced waits, before a request, until a limit that the last reply said
// was spent has reset (see pacer); it fails at once when that is past
// ctx's deadline.
func (c *Client) paced(ctx context.Context) error {
	wait := c.pace.wait()
	if wait <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return fmt.Errorf("the model API's rate limit resets in %s, past the task's deadline", wait.Round(time.Second))
	}
	return c.opts.Sleep(ctx, wait)
}

// once makes one request, in its chat span. wait < 0: the error is final;
// otherwise it may be retried after wait (0: the client's own backoff).
func (c *Client) once(ctx context.Context, body []byte, stream bool) (Reply, time.Duration, error) {
	if c.opts.Tracer == nil {
		return c.request(ctx, body, stream)
	}
	// An OpenAI-compatible endpoint speaks OpenAI's API, whoever serves
	// it: the conventions' provider for that API is openai.
	ctx, span := c.opts.Tracer.StartChat(ctx, tracing.Chat{Provider: "openai", Model: c.opts.Model, BaseURL: c.opts.BaseURL})
	reply, wait, err := c.request(ctx, body, stream)
	end := tracing.ChatEnd{ResponseID: reply.ID, ResponseModel: reply.Model, InputTokens: -1, OutputTokens: -1}
	if reply.FinishReason != "" {
		end.FinishReasons = []string{reply.FinishReason}
	}
	if reply.Usage != nil {
		end.InputTokens, end.OutputTokens = reply.Usage.PromptTokens, reply.Usage.CompletionTokens
	}
	var se *StatusError
	if errors.As(err, &se) {
		end.ErrorType = strconv.Itoa(se.Status)
	}
	span.EndChat(end, err)
	return reply, wait, err
}

// request makes one request, streamed or not. wait is as for once.
func (c *Client) request(ctx context.Context, body []byte, stream bool) (Reply, time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Reply{}, -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	switch {
	case c.opts.APIKey == "":
	case c.azure:
		// Azure's classic route takes an API key in api-key; a bearer
		// there is a Microsoft Entra token, and a key sent as one is
		// refused.
		req.Header.Set("api-key", c.opts.APIKey)
	default:
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		return Reply{}, transportWait(ctx), c.failed(ctx, rctx, "model API unreachable", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		c.pace.saw(resp.Header)
		reply, wait, err := readStream(resp.Body, textSink(ctx))
		if err != nil && (ctx.Err() != nil || rctx.Err() != nil) {
			return Reply{}, transportWait(ctx), c.failed(ctx, rctx, "reading the model's stream", err)
		}
		return reply, wait, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		return Reply{}, transportWait(ctx), c.failed(ctx, rctx, "reading the model's reply", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Reply{}, statusWait(resp.StatusCode, resp.Header, data), &StatusError{Status: resp.StatusCode, Body: snippet(data)}
	}
	c.pace.saw(resp.Header)
	if len(data) > maxReplyBytes {
		return Reply{}, -1, fmt.Errorf("the model's reply is larger than %d bytes", maxReplyBytes)
	}
	return parseReply(data)
}

// failed is the error of a request that failed in transport (what it
// was doing, and err): the task's own end, the request's timeout, or the
// cause.
func (c *Client) failed(ctx, rctx context.Context, doing string, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("model API did not answer within %s", c.opts.Timeout)
	}
	return fmt.Errorf("%s: %w", doing, unwrapURL(err))
}

// transportWait is once's wait after failed: final when the task has
// ended, otherwise retried with the client's backoff.
func transportWait(ctx context.Context) time.Duration {
	if ctx.Err() != nil {
		return -1
	}
	return 0
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

// wireError is the error member of a reply: OpenAI's
// {"message","type","code"} (code a string), or OpenRouter's
// {"code","message","metadata"} (code a number, the HTTP status the
// error would have had).
type wireError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	// Details are a Google API error's (see errorDetail).
	Details []errorDetail `json:"details"`
}

// wireReply is a chat-completions reply, loose where servers differ.
type wireReply struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Usage   *Usage `json:"usage"`
	Choices []struct {
		Message      json.RawMessage `json:"message"`
		FinishReason string          `json:"finish_reason"`
		Error        json.RawMessage `json:"error"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// bodyError reads an error member: nil when absent, null or empty; a
// string is taken as the message.
func bodyError(raw json.RawMessage) *wireError {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "{}", `""`:
		return nil
	}
	var e wireError
	if json.Unmarshal(raw, &e) != nil {
		if json.Unmarshal(raw, &e.Message) != nil {
			e.Message = string(raw)
		}
	}
	return &e
}

// parseReply normalises a reply (see Message.UnmarshalJSON). An error in
// an HTTP 200 body is an error: OpenRouter answers 200 once a model has
// started and puts a failure after that in the body, at the top or in the
// choice (https://openrouter.ai/docs/api/reference/errors-and-debugging).
// wait is as for once: such an error whose code is a status worth
// retrying (408, 429 but not a quota, 5xx) may be retried.
func parseReply(data []byte) (Reply, time.Duration, error) {
	var w wireReply
	if err := json.Unmarshal(data, &w); err != nil {
		return Reply{}, -1, fmt.Errorf("the model's reply is not chat-completions JSON: %w: %s", err, snippet(data))
	}
	e := bodyError(w.Error)
	if e == nil && len(w.Choices) > 0 {
		e = bodyError(w.Choices[0].Error)
	}
	if e != nil {
		return Reply{}, bodyErrorWait(e), fmt.Errorf("model API error in its reply: %s", snippet(data))
	}
	if len(w.Choices) == 0 {
		return Reply{}, -1, fmt.Errorf("the model's reply has no choices: %s", snippet(data))
	}
	ch := w.Choices[0]
	if t := strings.TrimSpace(string(ch.Message)); t == "" || t == "null" {
		return Reply{}, -1, fmt.Errorf("the model's reply has no message: %s", snippet(data))
	}
	var m Message
	if err := json.Unmarshal(ch.Message, &m); err != nil {
		return Reply{}, -1, fmt.Errorf("the model's reply has a message of the wrong shape: %w: %s", err, snippet(data))
	}
	m.Role = "assistant"
	for i := range m.ToolCalls {
		if m.ToolCalls[i].Type == "" {
			m.ToolCalls[i].Type = "function"
		}
		if m.ToolCalls[i].ID == "" {
			m.ToolCalls[i].ID = newCallID(i)
		}
	}
	reply := Reply{Message: m, FinishReason: ch.FinishReason, ID: w.ID, Model: w.Model, Usage: w.Usage}
	if err := interrupted(reply); err != nil {
		return reply, 0, err
	}
	return reply, 0, nil
}

// interrupted is the error of a reply without tool calls that the
// provider says it broke off for a reason of its own, which a new
// request may not meet: DeepSeek's insufficient_system_resource ("the
// request is interrupted due to insufficient resource of the inference
// system", https://api-docs.deepseek.com/api/create-chat-completion) and
// OpenRouter's error ("the model finishes the request with an error",
// https://openrouter.ai/docs/api/reference/overview). The client retries
// it as it does a 5xx. Nil for any other reply.
func interrupted(r Reply) error {
	if len(r.Message.ToolCalls) > 0 {
		return nil
	}
	switch r.FinishReason {
	case "insufficient_system_resource":
		return fmt.Errorf("the model API broke off its reply for lack of resources (finish_reason %q)", r.FinishReason)
	case "error":
		return fmt.Errorf("the model broke off its reply with an error (finish_reason %q)", r.FinishReason)
	}
	return nil
}

// bodyErrorWait is once's wait for an error in a 200 body: retried (with
// the client's backoff) when its numeric code is 408, 429 or 5xx and it
// is not about a quota; final otherwise.
func bodyErrorWait(e *wireError) time.Duration {
	raw := strings.Trim(string(e.Code), `"`)
	if raw == "server_error" && !isQuota(e) {
		// OpenRouter's error chunk when a provider failed mid-stream
		// (https://openrouter.ai/docs/api/reference/streaming#handling-errors-during-streaming).
		return 0
	}
	code, err := strconv.Atoi(raw)
	if err != nil || isQuota(e) {
		return -1
	}
	if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 {
		return 0
	}
	return -1
}

// isQuota says whether an error is about a spent quota or credit, which
// waiting does not fix: OpenAI's insufficient_quota (code or type, with
// "You exceeded your current quota" in a 429) and the same words from
// the servers that copy it. Gemini says the same words of its
// per-minute limits too, with a RetryInfo delay after which they lift
// (https://ai.google.dev/gemini-api/docs/rate-limits): that one is
// waited out, unless its quota is daily or 0 (lasting) or the delay is
// longer than a sub-agent is held for (maxRetryAfter).
func isQuota(e *wireError) bool {
	code := strings.Trim(string(e.Code), `"`)
	if code == "insufficient_quota" || e.Type == "insufficient_quota" {
		return true
	}
	if !strings.Contains(strings.ToLower(e.Message), "exceeded your current quota") {
		return false
	}
	d, ok := e.retryDelay()
	return !ok || d > maxRetryAfter || e.lasting()
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
