package agent

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// Message is one chat message, in the shape the API takes and returns.
//
// A reply's fields that the client does not know are kept verbatim in
// Extra and sent back unchanged with the message, because providers put
// state there that they require in the next request: DeepSeek's
// reasoning_content (even when it is ""), OpenRouter's reasoning_details.
// Which fields a provider wants back changes faster than this code, so
// the rule is "keep everything", with the few exceptions in dropField.
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
// extra_content.google.thought_signature, which must come back with it.
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
