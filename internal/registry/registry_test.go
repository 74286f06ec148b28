package registry

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// fakeTool is a tool whose schema and behaviour a test chooses.
type fakeTool struct {
	name    string
	schema  string
	run     func(ctx context.Context, args json.RawMessage) (string, error)
	timeout time.Duration
}

func (f *fakeTool) Name() string                { return f.name }
func (f *fakeTool) Description() string         { return "a test tool" }
func (f *fakeTool) Parameters() json.RawMessage { return json.RawMessage(f.schema) }
func (f *fakeTool) Timeout() time.Duration      { return f.timeout }
func (f *fakeTool) Execute(ctx context.Context, args json.RawMessage) (string, error) {
	if f.run == nil {
		return "ok " + string(args), nil
	}
	return f.run(ctx, args)
}

// richSchema uses every kind of constraint the validator reports: types,
// enums, bounds, lengths, required properties and additionalProperties.
const richSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 2, "maxLength": 5},
    "count": {"type": "integer", "minimum": 1, "maximum": 10},
    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
    "flag": {"type": "boolean"},
    "color": {"type": "string", "enum": ["red", "green"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
    "opts": {
      "type": "object",
      "properties": {
        "depth": {"type": "integer", "minimum": 0},
        "inner": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
      },
      "required": ["depth"]
    },
    "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// memAudit keeps the records it is given, started ones with status
// "started"; startErr and finishErr make it fail.
type memAudit struct {
	mu                  sync.Mutex
	recs                []audit.Record
	startErr, finishErr error
}

func (m *memAudit) Start(r audit.Record) (audit.Started, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.startErr != nil {
		return audit.Started{}, m.startErr
	}
	r.Status = audit.StatusStarted
	m.recs = append(m.recs, r)
	return audit.Started{}, nil
}

func (m *memAudit) Finish(_ audit.Started, r audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finishErr != nil {
		return m.finishErr
	}
	m.recs = append(m.recs, r)
	return nil
}

func newTestRegistry(t *testing.T, tools ...Tool) (*Registry, *memAudit) {
	t.Helper()
	a := &memAudit{}
	r := New(Options{Audit: a})
	for _, tool := range tools {
		if err := r.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	return r, a
}

func TestValidationMessages(t *testing.T) {
	r, _ := newTestRegistry(t, &fakeTool{name: "rich", schema: richSchema})
	cases := []struct {
		name, args string
		wants      []string
	}{
		{"string type", `{"name": 1}`, []string{"name should be string, not integer"}},
		{"minLength", `{"name": "a"}`, []string{"name must be at least 2 characters long"}},
		{"maxLength", `{"name": "abcdef"}`, []string{"name must be at most 5 characters long"}},
		{"integer type", `{"name": "ab", "count": "3"}`, []string{"count should be integer, not string"}},
		{"integer minimum", `{"name": "ab", "count": 0}`, []string{"count must be >= 1"}},
		{"integer maximum", `{"name": "ab", "count": 11}`, []string{"count must be <= 10"}},
		{"number type", `{"name": "ab", "ratio": true}`, []string{"ratio should be number, not boolean"}},
		{"number minimum", `{"name": "ab", "ratio": -0.5}`, []string{"ratio must be >= 0"}},
		{"number maximum", `{"name": "ab", "ratio": 1.5}`, []string{"ratio must be <= 1"}},
		{"boolean", `{"name": "ab", "flag": 1}`, []string{"flag should be boolean, not integer"}},
		{"enum", `{"name": "ab", "color": "blue"}`, []string{`color must be one of ["red", "green"]`}},
		{"array type", `{"name": "ab", "tags": {}}`, []string{"tags should be array, not object"}},
		{"array items recursive", `{"name": "ab", "tags": ["ok", "toolong", 3]}`, []string{"tags[1] must be at most 3 characters long", "tags[2] should be string, not integer"}},
		{"object type", `{"name": "ab", "opts": []}`, []string{"opts should be object, not array"}},
		{"object required", `{"name": "ab", "opts": {}}`, []string{"missing required opts.depth"}},
		{"object properties recursive", `{"name": "ab", "opts": {"depth": -1, "inner": {}}}`, []string{"opts.depth must be >= 0", "missing required opts.inner.x"}},
		{"array of objects", `{"name": "ab", "items": [{"id": 1}, {}]}`, []string{"missing required items[1].id"}},
		{"required", `{}`, []string{"missing required name"}},
		{"unknown parameter", `{"name": "ab", "extra": 1}`, []string{"unknown parameter extra"}},
		{"every problem listed", `{"count": 0, "flag": "x"}`, []string{"count must be >= 1", "flag should be boolean", "missing required name", "; "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := r.Invoke(context.Background(), "rich", []byte(c.args), Meta{})
			if res.Status != StatusError || res.Error.Code != toolerr.InvalidArguments {
				t.Fatalf("got %+v", res)
			}
			if !strings.HasPrefix(res.Result, "Error: Invalid parameters for tool 'rich': ") {
				t.Errorf("prefix: %s", res.Result)
			}
			for _, w := range c.wants {
				if !strings.Contains(res.Result, w) {
					t.Errorf("lacks %q: %s", w, res.Result)
				}
			}
		})
	}
	ok := r.Invoke(context.Background(), "rich", []byte(`{"name":"ab","count":3,"ratio":0.5,"flag":true,"color":"red","tags":["a"],"opts":{"depth":0,"inner":{"x":1.5}},"items":[{"id":1}]}`), Meta{})
	if ok.Status != StatusSuccess {
		t.Errorf("valid arguments refused: %s", ok.Result)
	}
}

func TestRegister(t *testing.T) {
	r := New(Options{})
	good := &fakeTool{name: "good", schema: `{"type":"object"}`}
	if err := r.Register(good); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		tool Tool
		want string
	}{
		{"duplicate", &fakeTool{name: "good", schema: `{"type":"object"}`}, "already registered"},
		{"bad name", &fakeTool{name: "has space", schema: `{"type":"object"}`}, "name must match"},
		{"long name", &fakeTool{name: strings.Repeat("a", 65), schema: `{"type":"object"}`}, "name must match"},
		{"not json", &fakeTool{name: "x1", schema: `{type: object}`}, "invalid parameters schema"},
		{"not an object schema", &fakeTool{name: "x2", schema: `{"type":"string"}`}, `"type": "object"`},
		{"invalid schema", &fakeTool{name: "x3", schema: `{"type":"object","properties":{"a":{"type":"nonsense"}}}`}, "invalid parameters schema"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			err := r.Register(c.tool)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Register = %v, want %q", err, c.want)
			}
		})
	}
}

func TestDefinitionsSortedAndStable(t *testing.T) {
	r, _ := newTestRegistry(t,
		&fakeTool{name: "zeta", schema: `{"type": "object"}`},
		&fakeTool{name: "alpha", schema: `{"type":"object",  "properties": {"b": {"type":"string"}, "a": {"type":"integer"}}}`},
	)
	first := string(r.DefinitionsJSON())
	if !strings.HasPrefix(first, `[{"type":"function","function":{"name":"alpha"`) || !strings.Contains(first, `"parameters":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}`) {
		t.Errorf("definitions: %s", first)
	}
	for i := 0; i < 20; i++ {
		if string(r.DefinitionsJSON()) != first {
			t.Fatal("definitions not byte-stable")
		}
	}
	defs := r.Definitions()
	if len(defs) != 2 || defs[0].Function.Name != "alpha" || defs[1].Function.Name != "zeta" {
		t.Errorf("Definitions order: %+v", defs)
	}
}

func TestInvokeOutcomes(t *testing.T) {
	panicky := &fakeTool{name: "panicky", schema: `{"type":"object"}`, run: func(context.Context, json.RawMessage) (string, error) {
		panic("boom")
	}}
	slow := &fakeTool{name: "slow", schema: `{"type":"object"}`, timeout: 20 * time.Millisecond, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	failing := &fakeTool{name: "failing", schema: `{"type":"object"}`, run: func(context.Context, json.RawMessage) (string, error) {
		return "", errors.New("disk on fire")
	}}
	coded := &fakeTool{name: "coded", schema: `{"type":"object"}`, run: func(context.Context, json.RawMessage) (string, error) {
		return "", toolerr.Errorf(toolerr.Busy, "too busy. Next: retry.")
	}}
	secret := &fakeTool{name: "secret", schema: `{"type":"object"}`, run: func(context.Context, json.RawMessage) (string, error) {
		return "the key is sk-0123456789", nil
	}}
	a := &memAudit{}
	r := New(Options{Audit: a, Redact: func(s string) string { return strings.ReplaceAll(s, "sk-0123456789", "[REDACTED]") }})
	for _, tool := range []Tool{panicky, slow, failing, coded, secret} {
		if err := r.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		tool, code, want string
	}{
		{"panicky", toolerr.ToolError, "internal failure in the tool"},
		{"slow", toolerr.Timeout, "did not finish within 20ms"},
		{"failing", toolerr.ToolError, "Error executing failing: disk on fire"},
		{"coded", toolerr.Busy, "Error: too busy. Next: retry."},
		{"missing", toolerr.UnknownTool, "Tool 'missing' not found"},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			res := r.Invoke(context.Background(), c.tool, nil, Meta{})
			if res.Status != StatusError || res.Error.Code != c.code || !strings.Contains(res.Result, c.want) {
				t.Errorf("got %+v", res)
			}
			// The prefix is the result text's, once; the message has none.
			if res.Result != "Error: "+res.Error.Message || strings.HasPrefix(res.Error.Message, "Error: ") {
				t.Errorf("result %q, message %q", res.Result, res.Error.Message)
			}
		})
	}
	res := r.Invoke(context.Background(), "secret", nil, Meta{})
	if res.Result != "the key is [REDACTED]" {
		t.Errorf("secret not redacted: %s", res.Result)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := r.Invoke(ctx, "slow", nil, Meta{}); res.Error == nil || res.Error.Code != toolerr.Canceled {
		t.Errorf("canceled call: %+v", res)
	}
	// A caller's context with the tool's deadline (as the HTTP doors
	// give it) times the call out the same.
	if got := r.Timeout("slow"); got != 20*time.Millisecond {
		t.Errorf("Timeout(slow) = %v", got)
	}
	if got := r.Timeout("missing"); got != 2*time.Minute {
		t.Errorf("Timeout(missing) = %v, want the default", got)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), r.Timeout("slow"))
	defer dcancel()
	if res := r.Invoke(dctx, "slow", nil, Meta{}); res.Error == nil || res.Error.Code != toolerr.Timeout || !strings.Contains(res.Result, "did not finish within 20ms") {
		t.Errorf("call with the caller's deadline: %+v", res)
	}
	// Every call leaves a start and a final record with the same call ID.
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.recs)%2 != 0 {
		t.Fatalf("%d records", len(a.recs))
	}
	for i := 0; i < len(a.recs); i += 2 {
		p, f := a.recs[i], a.recs[i+1]
		if p.Status != audit.StatusStarted || f.Status == audit.StatusStarted || p.CallID != f.CallID || len(p.CallID) != 36 {
			t.Errorf("records %d: %+v / %+v", i, p, f)
		}
	}
}

func TestCallContext(t *testing.T) {
	var got Call
	var events []string
	tool := &fakeTool{name: "ctx", schema: `{"type":"object"}`, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		got, _ = CallFrom(ctx)
		if !Streaming(ctx) {
			return "", errors.New("not streaming")
		}
		Progress(ctx, "output", "half")
		return "done", nil
	}}
	r, a := newTestRegistry(t, tool)
	listen := WithProgress(context.Background(), func(e, d string) { events = append(events, e+":"+d) })
	res := r.Invoke(listen, "ctx", []byte(`{}`), Meta{SessionID: "s1", Source: "feishu", Key: "alice"})
	if res.Status != StatusSuccess || got.ID != res.CallID || got.SessionID != "s1" || got.Source != "feishu" || got.Tool != "ctx" || got.Key != "alice" {
		t.Errorf("call %+v, result %+v", got, res)
	}
	a.mu.Lock()
	for _, rec := range a.recs {
		if rec.Key != "alice" {
			t.Errorf("audit record without the key's name: %+v", rec)
		}
	}
	a.mu.Unlock()
	if len(events) != 1 || events[0] != "output:half" {
		t.Errorf("events %v", events)
	}
	// Without a listener, Progress is a no-op.
	Progress(context.Background(), "x", "y")
}

// TestFactsAsTheyAre: the facts the caller gives reach the tool's Call
// and both audit records as one value, every field of it, with a secret
// pasted into any field the caller wrote redacted (the key's name is the
// operator's, not the caller's), and the workspace folder the policy's
// alone and the span ID the call's span's alone: a caller's is dropped.
func TestFactsAsTheyAre(t *testing.T) {
	var got Call
	tool := &fakeTool{name: "facts", schema: `{"type":"object"}`, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		got, _ = CallFrom(ctx)
		return "", nil
	}}
	a := &memAudit{}
	r := New(Options{Audit: a, Redact: func(s string) string { return strings.ReplaceAll(s, "sk-secret", "[REDACTED]") }})
	if err := r.Register(tool); err != nil {
		t.Fatal(err)
	}
	var meta, want Meta
	mv, wv := reflect.ValueOf(&meta).Elem(), reflect.ValueOf(&want).Elem()
	for i := range mv.NumField() {
		name := mv.Type().Field(i).Name
		mv.Field(i).SetString(name + " sk-secret")
		wv.Field(i).SetString(name + " [REDACTED]")
	}
	want.Key, want.Workspace, want.SpanID = meta.Key, "", ""
	r.Invoke(context.Background(), "facts", nil, meta)
	if got.Facts != want {
		t.Errorf("the tool's facts:\n%+v\nwant\n%+v", got.Facts, want)
	}
	if len(a.recs) != 2 {
		t.Fatalf("%d records", len(a.recs))
	}
	for _, rec := range a.recs {
		if rec.Facts != want {
			t.Errorf("the %s record's facts:\n%+v\nwant\n%+v", rec.Status, rec.Facts, want)
		}
	}
}

// TestDecodeIntegralNumbers: JSON Schema accepts 3.0 and 1e2 as integers,
// so the typed decode must too; an integer too large for the Go type is an
// invalid_arguments error that says so.
func TestDecodeIntegralNumbers(t *testing.T) {
	type args struct {
		N    int     `json:"n"`
		F    float64 `json:"f"`
		List []int   `json:"list"`
	}
	got, err := Decode[args](json.RawMessage(`{"n":3.0,"f":2.5,"list":[1e2,-0.0,7]}`))
	if err != nil || got.N != 3 || got.F != 2.5 || len(got.List) != 3 || got.List[0] != 100 || got.List[1] != 0 {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	_, err = Decode[args](json.RawMessage(`{"n":1e30}`))
	if toolerr.ErrorCode(err) != toolerr.InvalidArguments || !strings.Contains(err.Error(), "n must be <= 9223372036854775807") {
		t.Fatalf("Decode of 1e30 into int: %v", err)
	}
}

// TestAuditFaults: by default a call whose start the audit log cannot
// record is refused before its tool runs, and a call whose final record it
// cannot write is answered with an audit_failed error that still carries
// the tool's result. Failing open runs and answers both as usual.
func TestAuditFaults(t *testing.T) {
	full := errors.New("no space left on device")
	cases := []struct {
		name                string
		failOpen            bool
		startErr, finishErr error
		wantRuns            int
		wantStatus, code    string
		wantResult          []string
	}{
		{"start fails", false, full, nil, 0, StatusError, toolerr.AuditUnavailable, []string{"Error: the call was not run", "Next:"}},
		{"final record fails", false, nil, full, 1, StatusError, toolerr.AuditFailed, []string{"Error: the call ran", "do not repeat", "\n\nran {\"x\":1}"}},
		{"start fails, fail open", true, full, nil, 1, StatusSuccess, "", []string{"ran {\"x\":1}"}},
		{"final record fails, fail open", true, nil, full, 1, StatusSuccess, "", []string{"ran {\"x\":1}"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			tool := &fakeTool{name: "effect", schema: `{"type":"object"}`, run: func(_ context.Context, args json.RawMessage) (string, error) {
				runs++
				return "ran " + string(args), nil
			}}
			a := &memAudit{startErr: c.startErr, finishErr: c.finishErr}
			r := New(Options{Audit: a, AuditFailOpen: c.failOpen})
			if err := r.Register(tool); err != nil {
				t.Fatal(err)
			}
			res := r.Invoke(context.Background(), "effect", []byte(`{"x":1}`), Meta{})
			if runs != c.wantRuns || res.Status != c.wantStatus || len(res.CallID) != 36 {
				t.Fatalf("ran %d times, result %+v", runs, res)
			}
			if c.code == "" && res.Error != nil || c.code != "" && (res.Error == nil || res.Error.Code != c.code) {
				t.Errorf("error %+v, want code %q", res.Error, c.code)
			}
			for _, w := range c.wantResult {
				if !strings.Contains(res.Result, w) {
					t.Errorf("result lacks %q: %s", w, res.Result)
				}
			}
		})
	}
}

// TestLongValuesAreNotEchoed: an unknown tool's name, a parameter's name
// and values that break the schema may be megabytes long; the result names
// them shortened, never whole, and the audit record's tool name too.
func TestLongValuesAreNotEchoed(t *testing.T) {
	r, a := newTestRegistry(t, &fakeTool{name: "rich", schema: richSchema})
	long := strings.Repeat("ab", 50000)
	cases := []struct {
		tool, args string
	}{
		{long, `{}`},
		{"rich", `{"name": "` + long + `"}`},
		{"rich", `{"name": "ok", "` + long + `": 1}`},
		{"rich", `{"name": "ok", "color": "` + long + `"}`},
		{"rich", `{"name": "ok", "tags": ["` + long + `", "` + long + `"]}`},
		{"rich", `{"name": "ok", "opts": {"depth": "` + long + `"}}`},
		{"rich", `{"name": "ok", "count": 1e` + strings.Repeat("9", 500) + `}`},
		{"rich", `["` + long + `"]`},
		{"rich", `{"name": "` + long},
	}
	for _, c := range cases {
		res := r.Invoke(context.Background(), c.tool, []byte(c.args), Meta{})
		if res.Status != StatusError {
			t.Errorf("%.60s: status %s", c.args, res.Status)
		}
		if len(res.Result) > 2048 || len(res.Tool) > 2048 || strings.Contains(res.Result, long[:1000]) {
			t.Errorf("%.60s: %d-byte result, %d-byte tool name: %.300s", c.args, len(res.Result), len(res.Tool), res.Result)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rec := range a.recs {
		if len(rec.ToolName) > 2048 {
			t.Errorf("audit record with a %d-byte tool name", len(rec.ToolName))
		}
	}
}
