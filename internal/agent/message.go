package agent

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
)

// Message is one chat message, in the shape the API takes and returns.
//
// A reply's fields that the client does not know are kept verbatim in
// Extra. Client sends back only those that providers document as state
// they require in the next request (see echoMessage), since others
// refuse an assistant message with a field they do not take (Groq:
// "property 'reasoning' is unsupported").
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
	// Extra holds a reply's other fields by name, each as the JSON it came as.
	Extra map[string]json.RawMessage
}

// ToolCall is one call a model asks for. Arguments is always a JSON text
// (possibly invalid, as the model wrote it), never empty. Extra holds the
// call's other fields verbatim, such as Gemini's
// extra_content.google.thought_signature, which must come back with it
// (see echoCall).
type ToolCall struct {
	ID       string
	Type     string
	Function FunctionCall
	Extra    map[string]json.RawMessage
}

// FunctionCall is the function member of a ToolCall.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Reasoning returns the message's reasoning_content (DeepSeek, Qwen and
// vLLM's reasoning parsers), or "".
func (m Message) Reasoning() string {
	var s string
	_ = json.Unmarshal(m.Extra["reasoning_content"], &s)
	return s
}

// MarshalJSON writes the message in the form providers accept back.
//
// An assistant message with tool calls is sent with content "", whatever
// text came with the calls: Mistral refuses an assistant message that has
// both ("Assistant message must have either content or tool_calls, but
// not both"), and the client cannot tell Mistral from the servers that
// copy its rules (vLLM and proxies serving Mistral models) by address. The
// text beside a tool call is narration ("Let me look at the file"); the
// calls, their results and any reasoning fields in Extra carry the state,
// and the loop still reports the text if the task stops early. Every
// provider tried accepts "" beside tool calls.
func (m Message) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"role":`)
	writeJSON(&b, m.Role)
	content := m.Content
	if len(m.ToolCalls) > 0 {
		content = ""
	}
	b.WriteString(`,"content":`)
	writeJSON(&b, content)
	if len(m.ToolCalls) > 0 {
		b.WriteString(`,"tool_calls":`)
		writeJSON(&b, m.ToolCalls)
	}
	if m.ToolCallID != "" {
		b.WriteString(`,"tool_call_id":`)
		writeJSON(&b, m.ToolCallID)
	}
	writeExtra(&b, m.Extra)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a message as servers write it, loose where they
// differ: content null, a string or a list of text parts; tool calls
// without id or type; arguments as a JSON text, an object, or "".
func (m *Message) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	*m = Message{}
	_ = json.Unmarshal(fields["role"], &m.Role)
	m.Content = contentText(fields["content"])
	_ = json.Unmarshal(fields["tool_call_id"], &m.ToolCallID)
	if raw := fields["tool_calls"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m.ToolCalls); err != nil {
			return err
		}
	}
	m.Extra = extraFields(fields, "role", "content", "tool_calls", "tool_call_id")
	return nil
}

// MarshalJSON writes the call with its extra fields, unchanged.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeJSON(&b, c.ID)
	b.WriteString(`,"type":`)
	writeJSON(&b, c.Type)
	b.WriteString(`,"function":`)
	writeJSON(&b, c.Function)
	writeExtra(&b, c.Extra)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a call; arguments become JSON text (see argumentsText).
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	*c = ToolCall{}
	_ = json.Unmarshal(fields["id"], &c.ID)
	_ = json.Unmarshal(fields["type"], &c.Type)
	var fn struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(fields["function"], &fn)
	c.Function = FunctionCall{Name: fn.Name, Arguments: argumentsText(fn.Arguments)}
	// index is the position of a call in a streamed reply; some servers
	// leave it in whole replies too, and strict ones refuse it back.
	c.Extra = extraFields(fields, "id", "type", "function", "index")
	return nil
}

// extraFields returns fields without the known names and those dropField
// drops; nil when nothing is left.
func extraFields(fields map[string]json.RawMessage, known ...string) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for k, v := range fields {
		if dropField(k, v, known) {
			continue
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[k] = v
	}
	return out
}

// dropField says which extra fields are not sent back: null ones, which
// say nothing (refusal, function_call, audio are null in most replies),
// and the two that OpenAI's API documents for replies only, annotations
// (URL citations) and audio (a request takes only its id).
func dropField(name string, v json.RawMessage, known []string) bool {
	for _, k := range known {
		if name == k {
			return true
		}
	}
	t := strings.TrimSpace(string(v))
	return t == "" || t == "null" || name == "annotations" || name == "audio"
}

// writeExtra appends ,"name":value for each extra field, sorted by name
// so that the same message always gives the same bytes (prompt caches).
func writeExtra(b *bytes.Buffer, extra map[string]json.RawMessage) {
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b.WriteByte(',')
		writeJSON(b, k)
		b.WriteByte(':')
		if err := json.Compact(b, extra[k]); err != nil {
			b.WriteString("null")
		}
	}
}

func writeJSON(b *bytes.Buffer, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte("null")
	}
	b.Write(data)
}

// The fields of a reply that go back with it, because the provider that
// sent them documents that it needs them in the next request:
//   - reasoning_content: DeepSeek in thinking mode answers 400 without it
//     on every assistant message with tool calls (even when it is "");
//     vLLM and Qwen's reasoning parsers write the same field
//     (https://api-docs.deepseek.com/guides/thinking_mode);
//   - reasoning_details: OpenRouter's reasoning blocks, to be returned
//     unmodified with tool calls
//     (https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks);
//   - extra_content on a tool call: Gemini 3's thought_signature, without
//     which it answers 400 (https://ai.google.dev/gemini-api/docs/openai#thinking).
//
// Everything else a reply adds (Groq's and Ollama's reasoning,
// OpenRouter's reasoning and refusal, provider ids) is not sent back:
// strict servers refuse it and lenient ones ignore it.
var (
	echoMessage = []string{"reasoning_content", "reasoning_details"}
	echoCall    = []string{"extra_content"}
)

// echoFilter decides which extra fields go back to the model: the
// documented ones and the operator's (EchoFields), or all with "*".
type echoFilter struct {
	all  bool
	more []string
}

func newEchoFilter(more []string) echoFilter {
	return echoFilter{all: slices.Contains(more, "*"), more: more}
}

// messages returns msgs with only the extra fields that go back; msgs
// itself is left as it is (the caller's history keeps every field).
func (f echoFilter) messages(msgs []Message) []Message {
	if f.all {
		return msgs
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.Extra = f.keep(m.Extra, echoMessage)
		if len(m.ToolCalls) > 0 {
			calls := make([]ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.Extra = f.keep(c.Extra, echoCall)
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		out[i] = m
	}
	return out
}

func (f echoFilter) keep(extra map[string]json.RawMessage, documented []string) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for k, v := range extra {
		if !slices.Contains(documented, k) && !slices.Contains(f.more, k) {
			continue
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[k] = v
	}
	return out
}
