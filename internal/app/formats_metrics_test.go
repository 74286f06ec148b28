package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// allToolsService runs the service with every tool that can be on here
// (exec without a sandbox, spawn with a model address that is never
// called), so that every tool's schema goes through the formats.
func allToolsService(t *testing.T) (*App, *httptest.Server) {
	t.Helper()
	cfg := testConfig(t, map[string]string{
		"EXEC_SANDBOX": "none", "LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MODEL": "m",
	})
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return a, srv
}

// keysOf returns the sorted keys of a JSON object.
func keysOf(m map[string]any) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// The documented rules of each API's tools field, written out here rather
// than taken from the code that follows them.
var (
	// OpenAI (Chat Completions and Responses) and Anthropic: function names.
	openAIName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// Gemini: starts with a letter or an underscore; letters, digits,
	// underscores, dots, colons and dashes; at most 64.
	geminiName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)
	// Gemini's Schema object: the fields it has.
	geminiSchemaFields = []string{"anyOf", "default", "description", "enum", "example", "format", "items", "maxItems",
		"maxLength", "maxProperties", "maximum", "minItems", "minLength", "minProperties", "minimum", "nullable",
		"pattern", "properties", "propertyOrdering", "required", "title", "type"}
	// Gemini's Type enum.
	geminiTypes = []string{"ARRAY", "BOOLEAN", "INTEGER", "NULL", "NUMBER", "OBJECT", "STRING"}
	// Gemini's documented formats by type.
	geminiFormats = map[string][]string{"NUMBER": {"float", "double"}, "INTEGER": {"int32", "int64"}, "STRING": {"enum", "date-time"}}
)

// checkGeminiSchema reports every way s breaks Gemini's Schema rules.
func checkGeminiSchema(path string, s map[string]any, errs *[]string) {
	bad := func(format string, args ...any) { *errs = append(*errs, path+": "+fmt.Sprintf(format, args...)) }
	for _, k := range keysOf(s) {
		if !slices.Contains(geminiSchemaFields, k) {
			bad("field %q is not in Gemini's Schema", k)
		}
	}
	typ, _ := s["type"].(string)
	if !slices.Contains(geminiTypes, typ) {
		bad("type %v is not one of %v", s["type"], geminiTypes)
	}
	if f, ok := s["format"].(string); ok && !slices.Contains(geminiFormats[typ], f) {
		bad("format %q is not documented for %s", f, typ)
	}
	if enum, ok := s["enum"].([]any); ok {
		if typ != "STRING" {
			bad("enum on type %s", typ)
		}
		for _, v := range enum {
			if _, ok := v.(string); !ok {
				bad("enum value %v is not a string", v)
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	if typ == "OBJECT" {
		for _, name := range keysOf(props) {
			p, ok := props[name].(map[string]any)
			if !ok {
				bad("property %s is not a schema", name)
				continue
			}
			checkGeminiSchema(path+"."+name, p, errs)
		}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := props[fmt.Sprint(r)]; !ok {
					bad("required %v is not a property", r)
				}
			}
		}
	}
	if typ == "ARRAY" {
		items, ok := s["items"].(map[string]any)
		if !ok {
			bad("array without items")
		} else {
			checkGeminiSchema(path+"[]", items, errs)
		}
	}
}

// TestToolFormats: GET /tools?format= for every format follows the
// documented rules of that API's tools field, is the same bytes on every
// call, names the formats when asked for an unknown one, and the default
// is still OpenAI's Chat Completions format.
func TestToolFormats(t *testing.T) {
	a, srv := allToolsService(t)
	names := a.Registry().Names()
	if !slices.Contains(names, "exec") || !slices.Contains(names, "spawn") {
		t.Fatalf("tools %q: want exec and spawn among them", names)
	}
	fetch := func(query string) (int, []byte) {
		code, _, body := get(t, srv.URL+"/tools"+query, http.Header{})
		return code, body
	}
	_, def := fetch("")
	if _, openai := fetch("?format=openai"); !bytes.Equal(def, openai) {
		t.Error("the default differs from format=openai")
	}
	for _, format := range []string{"openai", "responses", "anthropic", "gemini"} {
		t.Run(format, func(t *testing.T) {
			code, body := fetch("?format=" + format)
			if _, again := fetch("?format=" + format); code != 200 || !bytes.Equal(body, again) {
				t.Fatalf("%d, or not the same bytes twice: %s", code, body)
			}
			var list []map[string]any
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			var errs []string
			bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
			switch format {
			case "openai":
				for _, d := range list {
					fn, _ := d["function"].(map[string]any)
					if !slices.Equal(keysOf(d), []string{"function", "type"}) || d["type"] != "function" ||
						!slices.Equal(keysOf(fn), []string{"description", "name", "parameters"}) {
						bad("not a Chat Completions tool: %v", keysOf(d))
					}
					got = append(got, fmt.Sprint(fn["name"]))
				}
			case "responses":
				for _, d := range list {
					// Flat: no "function" wrapper, strict given.
					if !slices.Equal(keysOf(d), []string{"description", "name", "parameters", "strict", "type"}) ||
						d["type"] != "function" || d["strict"] != false {
						bad("not a Responses function tool: %v", d)
					}
					if p, _ := d["parameters"].(map[string]any); p["type"] != "object" || !openAIName.MatchString(fmt.Sprint(d["name"])) {
						bad("%v: parameters must be an object schema, the name [a-zA-Z0-9_-]{1,64}", d["name"])
					}
					got = append(got, fmt.Sprint(d["name"]))
				}
			case "anthropic":
				for _, d := range list {
					if !slices.Equal(keysOf(d), []string{"description", "input_schema", "name"}) {
						bad("not an Anthropic tool: %v", keysOf(d))
					}
					if s, _ := d["input_schema"].(map[string]any); s["type"] != "object" || !openAIName.MatchString(fmt.Sprint(d["name"])) {
						bad("%v: input_schema must have type object, the name [a-zA-Z0-9_-]{1,64}", d["name"])
					}
					got = append(got, fmt.Sprint(d["name"]))
				}
			case "gemini":
				if len(list) != 1 || !slices.Equal(keysOf(list[0]), []string{"functionDeclarations"}) {
					t.Fatalf("want one Tool with functionDeclarations: %s", body)
				}
				decls, _ := list[0]["functionDeclarations"].([]any)
				for _, x := range decls {
					d, _ := x.(map[string]any)
					name := fmt.Sprint(d["name"])
					if !slices.Equal(keysOf(d), []string{"description", "name", "parameters"}) || !geminiName.MatchString(name) {
						bad("not a Gemini function declaration: %v", keysOf(d))
					}
					p, _ := d["parameters"].(map[string]any)
					if p["type"] != "OBJECT" {
						bad("%s: parameters type %v, want OBJECT", name, p["type"])
					}
					checkGeminiSchema(name, p, &errs)
					got = append(got, name)
				}
			}
			for _, e := range errs {
				t.Error(e)
			}
			if !slices.Equal(got, names) {
				t.Errorf("tools %q, want %q in order", got, names)
			}
		})
	}
	code, body := fetch("?format=claude")
	if code != http.StatusBadRequest || !strings.Contains(string(body), "openai, responses, anthropic, gemini") {
		t.Errorf("unknown format: %d %s", code, body)
	}
}

// TestMetricsDoor: /metrics needs the key, parses as Prometheus's text
// format (with Prometheus's own parser) and counts the calls made over
// REST and MCP: by tool and status, errors by code, durations, none in
// flight after, audit faults at zero, and the sandbox mode.
func TestMetricsDoor(t *testing.T) {
	_, srv, _ := doorService(t)
	if code, _, _ := get(t, srv.URL+"/metrics", http.Header{}); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the key: %d", code)
	}
	post := func(tool, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tools/"+tool+"/invoke", strings.NewReader(body))
		req.Header = withKey()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post("write_file", `{"path":"m.txt","content":"x"}`)
	post("read_file", `{"path":"m.txt"}`)
	post("read_file", `{"path":"missing.txt"}`)
	post("read_file", `{"path":5}`)

	code, _, body := get(t, srv.URL+"/metrics", withKey())
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v", err)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
	next:
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.Counter.GetValue(), true
			case dto.MetricType_GAUGE:
				return m.Gauge.GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
		return 0, false
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"toolsvc_tool_calls_total", map[string]string{"tool": "read_file", "status": "success"}, 1},
		{"toolsvc_tool_calls_total", map[string]string{"tool": "read_file", "status": "error"}, 2},
		{"toolsvc_tool_calls_total", map[string]string{"tool": "write_file", "status": "success"}, 1},
		{"toolsvc_tool_errors_total", map[string]string{"tool": "read_file", "code": "invalid_arguments"}, 1},
		{"toolsvc_tool_errors_total", map[string]string{"tool": "read_file", "code": "not_found"}, 1},
		{"toolsvc_tool_call_duration_seconds", map[string]string{"tool": "read_file"}, 3},
		{"toolsvc_tool_calls_in_flight", nil, 0},
		{"toolsvc_audit_failures_total", map[string]string{"stage": "start"}, 0},
		{"toolsvc_audit_failures_total", map[string]string{"stage": "finish"}, 0},
		{"toolsvc_exec_sandbox_mode", map[string]string{"mode": "off"}, 1},
	} {
		if got, ok := value(tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Error("the Go runtime's and the process's metrics are missing")
	}
}

// TestMetricsSandboxMode: the exec sandbox's mode in force is the one
// series of toolsvc_exec_sandbox_mode set to 1.
func TestMetricsSandboxMode(t *testing.T) {
	_, srv := allToolsService(t) // EXEC_SANDBOX=none
	_, _, body := get(t, srv.URL+"/metrics", http.Header{})
	var modes []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "toolsvc_exec_sandbox_mode{") {
			modes = append(modes, l)
		}
	}
	if !slices.Equal(modes, []string{`toolsvc_exec_sandbox_mode{mode="none"} 1`}) {
		t.Errorf("sandbox mode series: %q", modes)
	}
}
