package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// textSinkKey is the context key of WithTextSink.
type textSinkKey struct{}

// WithTextSink returns ctx with sink, to which a streaming Client passes
// the text of the reply it is reading as it arrives (each piece once,
// in order; reasoning and tool calls are not text). A reply that fails
// and is asked for again streams its text again.
func WithTextSink(ctx context.Context, sink func(text string)) context.Context {
	return context.WithValue(ctx, textSinkKey{}, sink)
}

func textSink(ctx context.Context) func(string) {
	if f, ok := ctx.Value(textSinkKey{}).(func(string)); ok && f != nil {
		return f
	}
	return func(string) {}
}

// streamOnly says whether err is a model's refusal of a request that is
// not streamed: DashScope's QwQ and QVQ models answer 400 "This model
// only support stream mode, please enable the stream parameter to access
// the model" (https://docs.qwencloud.com/resources/faq-text-generation,
// "Which models require streaming?"), and its Qwen3 models in thinking
// mode "parameter.enable_thinking must be set to false for non-streaming
// calls" (https://www.alibabacloud.com/help/en/model-studio/deep-thinking:
// the thinking mode only supports incremental output).
func streamOnly(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest {
		return false
	}
	b := strings.ToLower(se.Body)
	return strings.Contains(b, "only support stream mode") || strings.Contains(b, "must be set to false for non-streaming calls")
}

// wireChunk is one server-sent chunk of a streamed reply
// (https://platform.openai.com/docs/api-reference/chat-streaming), loose
// where servers differ. An error may come as a chunk of its own:
// {"error":{...}} (OpenAI, OpenRouter, whose chunk also has a choice
// with finish_reason "error"), or vLLM's {"object":"error","message"}.
type wireChunk struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Usage   *Usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Delta        map[string]json.RawMessage `json:"delta"`
		FinishReason *string                    `json:"finish_reason"`
		Error        json.RawMessage            `json:"error"`
	} `json:"choices"`
}

// readStream reads a streamed reply from r (server-sent events, data
// lines of chunks, ending with data: [DONE]), passes its text to sink as
// it comes, and returns the assembled reply, normalised as parseReply
// does a whole one. wait is as for once: a stream that ends before its
// reply did, or brings an error, may be retried.
func readStream(r io.Reader, sink func(string)) (Reply, time.Duration, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxReplyBytes+1), 64<<10)
	var a assembler
	var data strings.Builder
	var read int
	for {
		line, err := br.ReadString('\n')
		if read += len(line); read > maxReplyBytes {
			return Reply{}, -1, fmt.Errorf("the model's reply is larger than %d bytes", maxReplyBytes)
		}
		line = strings.TrimRight(line, "\r\n")
		// Other lines are comments (": OPENROUTER PROCESSING", keep-alives)
		// and the event, id and retry fields, which chat streams do not use.
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(v, " "))
		}
		if (line == "" || err != nil) && data.Len() > 0 {
			payload := data.String()
			data.Reset()
			if strings.TrimSpace(payload) == "[DONE]" {
				return a.reply()
			}
			if wait, cerr := a.add([]byte(payload), sink); cerr != nil {
				return Reply{}, wait, cerr
			}
		}
		if err != nil {
			if err != io.EOF {
				return Reply{}, 0, fmt.Errorf("reading the model's stream: %w", unwrapURL(err))
			}
			if a.finish == "" {
				return Reply{}, 0, errors.New("the model's stream ended before its reply did (no finish_reason and no [DONE])")
			}
			return a.reply()
		}
	}
}

// assembler builds one reply of its chunks: the text and every other
// field of the deltas (strings are joined, as reasoning_content and
// reasoning come in pieces; lists are joined, as OpenRouter's
// reasoning_details; anything else is replaced by its latest value), and
// the tool calls by their index, whose arguments come in pieces.
type assembler struct {
	id, model, finish string
	usage             *Usage
	content           strings.Builder
	fields            map[string]*deltaField
	names             []string
	calls             []*deltaCall
}

type deltaField struct {
	text  *strings.Builder
	list  []json.RawMessage
	value json.RawMessage
}

type deltaCall struct {
	index         int
	id, typ, name string
	args          strings.Builder
	extra         map[string]json.RawMessage
}

// add takes one chunk; an error chunk ends the stream with its error.
func (a *assembler) add(payload []byte, sink func(string)) (time.Duration, error) {
	var c wireChunk
	if err := json.Unmarshal(payload, &c); err != nil {
		return -1, fmt.Errorf("a chunk of the model's stream is not JSON: %w: %s", err, snippet(payload))
	}
	e := bodyError(c.Error)
	if e == nil && c.Object == "error" {
		e = &wireError{Message: c.Message}
	}
	for _, ch := range c.Choices {
		if e == nil {
			e = bodyError(ch.Error)
		}
	}
	if e != nil {
		return bodyErrorWait(e), fmt.Errorf("model API error in its stream: %s", snippet(payload))
	}
	if a.id == "" {
		a.id, a.model = c.ID, c.Model
	}
	if c.Usage != nil {
		a.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.finish = *ch.FinishReason
		}
		a.delta(ch.Delta, sink)
	}
	return 0, nil
}

// delta merges one choice's delta.
func (a *assembler) delta(d map[string]json.RawMessage, sink func(string)) {
	for k, v := range d {
		switch k {
		case "role":
		case "content":
			if t := contentText(v); t != "" {
				a.content.WriteString(t)
				sink(t)
			}
		case "tool_calls":
			var calls []map[string]json.RawMessage
			_ = json.Unmarshal(v, &calls)
			for _, tc := range calls {
				a.call(tc)
			}
		default:
			a.field(k, v)
		}
	}
}

func (a *assembler) field(k string, v json.RawMessage) {
	t := strings.TrimSpace(string(v))
	if t == "" || t == "null" {
		return
	}
	f := a.fields[k]
	if f == nil {
		if a.fields == nil {
			a.fields = map[string]*deltaField{}
		}
		f = &deltaField{}
		a.fields[k] = f
		a.names = append(a.names, k)
	}
	var s string
	var list []json.RawMessage
	switch {
	case json.Unmarshal(v, &s) == nil && f.list == nil && f.value == nil:
		if f.text == nil {
			f.text = &strings.Builder{}
		}
		f.text.WriteString(s)
	case json.Unmarshal(v, &list) == nil && f.text == nil && f.value == nil:
		f.list = append(f.list, list...)
	default:
		f.text, f.list, f.value = nil, nil, v
	}
}

// call merges a tool call's delta: the call of its index (a server that
// sends none starts a new call with each new id), its id, type and name
// as first given, its arguments in pieces (or whole, as an object), and
// its other fields (Gemini's extra_content) as last given.
func (a *assembler) call(d map[string]json.RawMessage) {
	var idx *int
	_ = json.Unmarshal(d["index"], &idx)
	var id, typ string
	_ = json.Unmarshal(d["id"], &id)
	_ = json.Unmarshal(d["type"], &typ)
	c := a.callOf(idx, id)
	if c.id == "" {
		c.id = id
	}
	if c.typ == "" {
		c.typ = typ
	}
	c.function(d["function"])
	for k, v := range d {
		if k != "index" && k != "id" && k != "type" && k != "function" && strings.TrimSpace(string(v)) != "null" {
			if c.extra == nil {
				c.extra = map[string]json.RawMessage{}
			}
			c.extra[k] = v
		}
	}
}

// callOf returns the call a delta with index idx (nil: none given) and
// id belongs to, a new one if none.
func (a *assembler) callOf(idx *int, id string) *deltaCall {
	for _, x := range a.calls {
		if idx != nil && x.index == *idx {
			return x
		}
	}
	if idx == nil && len(a.calls) > 0 && (id == "" || id == a.calls[len(a.calls)-1].id) {
		return a.calls[len(a.calls)-1]
	}
	c := &deltaCall{index: len(a.calls)}
	if idx != nil {
		c.index = *idx
	}
	a.calls = append(a.calls, c)
	return c
}

// function merges a delta's function member: the name as first given
// (or in pieces), the arguments in pieces of a JSON text, or whole as an
// object.
func (c *deltaCall) function(raw json.RawMessage) {
	var fn struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(raw, &fn)
	if fn.Name != "" && fn.Name != c.name {
		c.name += fn.Name
	}
	var piece string
	if json.Unmarshal(fn.Arguments, &piece) == nil {
		c.args.WriteString(piece)
	} else if t := strings.TrimSpace(string(fn.Arguments)); t != "" && t != "null" {
		c.args.Reset()
		c.args.WriteString(t)
	}
}

// reply is the assembled reply, through parseReply as a whole reply is.
func (a *assembler) reply() (Reply, time.Duration, error) {
	msg := map[string]any{"role": "assistant", "content": a.content.String()}
	for _, k := range a.names {
		switch f := a.fields[k]; {
		case f.text != nil:
			msg[k] = f.text.String()
		case f.list != nil:
			msg[k] = f.list
		default:
			msg[k] = f.value
		}
	}
	if len(a.calls) > 0 {
		calls := make([]map[string]any, len(a.calls))
		for i, c := range a.calls {
			m := map[string]any{"id": c.id, "type": c.typ, "function": map[string]string{"name": c.name, "arguments": c.args.String()}}
			for k, v := range c.extra {
				m[k] = v
			}
			calls[i] = m
		}
		msg["tool_calls"] = calls
	}
	whole := map[string]any{"id": a.id, "model": a.model, "usage": a.usage,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": a.finish}}}
	data, err := json.Marshal(whole)
	if err != nil {
		return Reply{}, -1, err
	}
	return parseReply(data)
}
