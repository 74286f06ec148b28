package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testKey is the API key of the door tests' service.
const testKey = "door-key-0123456789abcdef"

// doorService runs the service built from a config value behind a real
// HTTP server, with a key, the file and memory tools, and CORS for one
// origin.
func doorService(t *testing.T) (*App, *httptest.Server, string) {
	t.Helper()
	data := t.TempDir() + "/data"
	cfg := testConfig(t, map[string]string{
		"API_KEYS": testKey, "TOOLS_ENABLED": "files,memory", "DATA_DIR": data,
		"CORS_ORIGINS": "https://chat.example.com",
	})
	a, err := New(cfg, Options{Version: "v-doors"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return a, srv, data
}

// headerTransport adds headers to every request, as an MCP client
// configured with a key and a session does.
type headerTransport struct {
	h    http.Header
	base http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

func mcpConnect(ctx context.Context, url string, h http.Header) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "doors-test", Version: "1"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url + "/mcp",
		HTTPClient: &http.Client{Transport: headerTransport{h: h, base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
}

// metaOf is the _meta of a result's text block: the call's bookkeeping.
func metaOf(res *mcp.CallToolResult) mcp.Meta {
	if len(res.Content) == 0 {
		return nil
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	if tc == nil {
		return nil
	}
	return tc.Meta
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}

// TestMCPDoor drives /mcp with the MCP Go SDK's own client over HTTP:
// the key is required, every tool is listed with its schema, calls run
// through the registry (validation, audit with the session, redaction) and
// a failed call is an isError result with the advice the REST door gives.
func TestMCPDoor(t *testing.T) {
	a, srv, data := doorService(t)
	ctx := context.Background()

	if _, err := mcpConnect(ctx, srv.URL, http.Header{}); err == nil {
		t.Fatal("an MCP client without the key connected")
	}
	sess, err := mcpConnect(ctx, srv.URL, http.Header{
		"Authorization": {"Bearer " + testKey}, "X-Session-Id": {"mcp-session-7"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	list, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if want := a.Registry().Names(); !slices.Equal(names, want) {
		t.Errorf("tools/list names %q, want %q", names, want)
	}
	for _, d := range a.Registry().Definitions() {
		i := slices.Index(names, d.Function.Name)
		if i < 0 {
			continue
		}
		var want any
		_ = json.Unmarshal(d.Function.Parameters, &want)
		got, _ := json.Marshal(list.Tools[i].InputSchema)
		var gotV any
		_ = json.Unmarshal(got, &gotV)
		if !reflect.DeepEqual(gotV, want) || list.Tools[i].Description != d.Function.Description {
			t.Errorf("tools/list %s: schema or description differ from GET /tools", d.Function.Name)
		}
	}

	// A call that works, and a file holding the key, which must come back
	// redacted.
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{
		"path": "notes/a.txt", "content": "hello from mcp\nkey=" + testKey + "\n",
	}})
	if err != nil || res.IsError {
		t.Fatalf("write_file: %v %+v", err, res)
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "notes/a.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("read_file: %v %+v", err, res)
	}
	if got := textOf(t, res); !strings.Contains(got, "hello from mcp") || strings.Contains(got, testKey) {
		t.Errorf("read_file over MCP = %q: want the text without the key", got)
	}
	// The bookkeeping is the text block's _meta; the result carries none
	// that a client would hand its model.
	if m := metaOf(res); m["status"] != "success" || m["call_id"] == "" || res.Meta["call_id"] != nil || res.StructuredContent != nil {
		t.Errorf("_meta = %v, result _meta = %v", m, res.Meta)
	}

	// Arguments that break the schema: an error result, not a protocol
	// error, with the registry's message and code.
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": 5}})
	if err != nil {
		t.Fatalf("invalid arguments were a protocol error: %v", err)
	}
	if got := textOf(t, res); !res.IsError || !strings.HasPrefix(got, "Error: ") || metaOf(res)["error_code"] != "invalid_arguments" {
		t.Errorf("invalid arguments: isError=%v meta=%v text=%q", res.IsError, metaOf(res), got)
	}
	// A tool's own failure (a path outside the workspace) too.
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "../../etc/passwd"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "Next") {
		t.Errorf("path outside the workspace: %v isError=%v %q", err, res != nil && res.IsError, textOf(t, res))
	}
	// A tool that does not exist is the protocol's error.
	if _, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Error("calling an unknown tool was no error")
	}

	// Every call above is in the audit log with the session of the header.
	var audited []string
	_ = filepath.WalkDir(filepath.Join(data, "audit_logs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		b, _ := os.ReadFile(p)
		var rec struct {
			ToolName  string `json:"tool_name"`
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.SessionID == "mcp-session-7" {
			audited = append(audited, rec.ToolName)
		}
		if bytes.Contains(b, []byte(testKey)) {
			t.Errorf("audit record %s holds the key", p)
		}
		return nil
	})
	slices.Sort(audited)
	if want := []string{"read_file", "read_file", "read_file", "write_file"}; !slices.Equal(audited, want) {
		t.Errorf("audited calls of the MCP session: %q, want %q", audited, want)
	}
}

// get fetches path with the key and returns status, headers and body.
func get(t *testing.T, url string, h http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func withKey() http.Header { return http.Header{"Authorization": {"Bearer " + testKey}} }

// TestOpenAPIDoor: GET /openapi.json is a valid OpenAPI document (checked
// by kin-openapi's loader and validator), holds the hand-kept contract's
// routes as written plus one literal path per tool whose request body is
// the tool's schema, and a request built for a tool's operation is
// validated against that schema.
func TestOpenAPIDoor(t *testing.T) {
	a, srv, _ := doorService(t)
	if code, _, _ := get(t, srv.URL+"/openapi.json", http.Header{}); code != http.StatusUnauthorized {
		t.Errorf("GET /openapi.json without the key: %d", code)
	}
	code, _, body := get(t, srv.URL+"/openapi.json", withKey())
	if code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %s", code, body)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the generated document is not valid OpenAPI: %v", err)
	}
	if doc.Info.Version != "v-doors" {
		t.Errorf("info.version = %q", doc.Info.Version)
	}

	contract, err := loader.LoadFromFile(filepath.Join("..", "..", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The contract's routes are in the generated document unchanged.
	for path, item := range contract.Paths.Map() {
		gen := doc.Paths.Find(path)
		if gen == nil {
			t.Errorf("%s is in api/openapi.yaml but not in /openapi.json", path)
			continue
		}
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("api/openapi.yaml: %s %s has no operationId", method, path)
			}
			if g := gen.GetOperation(method); g == nil || g.OperationID != op.OperationID || !reflect.DeepEqual(responseCodes(g), responseCodes(op)) {
				t.Errorf("%s %s differs between api/openapi.yaml and /openapi.json", method, path)
			}
		}
	}
	// The bearer key is optional in both: no keys configured, none needed.
	for name, d := range map[string]*openapi3.T{"api/openapi.yaml": contract, "/openapi.json": doc} {
		if len(d.Security) != 2 || len(d.Security[1]) != 0 || d.Security[0]["bearer"] == nil {
			t.Errorf("%s: security = %v, want [{bearer: []}, {}]", name, d.Security)
		}
		for _, r := range []string{"BadRequest", "MethodNotAllowed", "RequestTimeout", "HeaderFieldsTooLarge"} {
			if d.Components.Responses[r] == nil {
				t.Errorf("%s: response %s is not documented", name, r)
			}
		}
		for _, h := range []string{"X-Request-ID", "Retry-After", "WWW-Authenticate"} {
			if d.Components.Headers[h] == nil {
				t.Errorf("%s: header %s is not documented", name, h)
			}
		}
	}
	// One literal path per tool, and nothing else added.
	if want, got := len(contract.Paths.Map())+len(a.Registry().Names()), len(doc.Paths.Map()); got != want {
		t.Errorf("/openapi.json has %d paths, want %d", got, want)
	}
	for _, d := range a.Registry().Definitions() {
		item := doc.Paths.Find("/tools/" + d.Function.Name + "/invoke")
		if item == nil || item.Post == nil {
			t.Errorf("no POST /tools/%s/invoke", d.Function.Name)
			continue
		}
		op := item.Post
		if op.OperationID != d.Function.Name || op.Summary == "" || op.Description != d.Function.Description || !slices.Equal(op.Tags, []string{"tools"}) {
			t.Errorf("%s: operationId %q, summary %q, tags %q", d.Function.Name, op.OperationID, op.Summary, op.Tags)
		}
		got, _ := json.Marshal(op.RequestBody.Value.Content.Get("application/json").Schema.Value)
		var gotV, want any
		_ = json.Unmarshal(got, &gotV)
		_ = json.Unmarshal(d.Function.Parameters, &want)
		if !reflect.DeepEqual(gotV, want) {
			t.Errorf("%s: request body schema\n%s\nwant the tool's\n%s", d.Function.Name, got, d.Function.Parameters)
		}
	}

	// scope=tools: the tools' operations only, still a valid document,
	// for clients that offer every operation to the model.
	code, _, body = get(t, srv.URL+"/openapi.json?scope=tools", withKey())
	tdoc, err := loader.LoadFromData(body)
	if code != http.StatusOK || err != nil {
		t.Fatalf("scope=tools: %d %v", code, err)
	}
	if err := tdoc.Validate(context.Background()); err != nil {
		t.Fatalf("scope=tools is not valid OpenAPI: %v", err)
	}
	var ops []string
	for _, item := range tdoc.Paths.Map() {
		for _, op := range item.Operations() {
			ops = append(ops, op.OperationID)
		}
	}
	slices.Sort(ops)
	if want := a.Registry().Names(); !slices.Equal(ops, want) {
		t.Errorf("scope=tools operations %q, want the tools %q", ops, want)
	}
	if code, _, _ := get(t, srv.URL+"/openapi.json?scope=x", withKey()); code != http.StatusBadRequest {
		t.Errorf("unknown scope: %d", code)
	}

	// A client validating its requests with the document accepts good
	// arguments and refuses bad ones, as the service will.
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		ok   bool
	}{{`{"path":"a.txt"}`, true}, {`{"path":5}`, false}, {`{"path":"a.txt","start_line":0}`, false}} {
		req, _ := http.NewRequest(http.MethodPost, "/tools/read_file/invoke", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatal(err)
		}
		if route.Operation.OperationID != "read_file" {
			t.Errorf("route for /tools/read_file/invoke is %q", route.Operation.OperationID)
		}
		err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		})
		if (err == nil) != tc.ok {
			t.Errorf("read_file %s: validation error %v, want ok=%v", tc.body, err, tc.ok)
		}
	}
}

func responseCodes(op *openapi3.Operation) []string {
	var codes []string
	for c := range op.Responses.Map() {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// TestCORS: an allowed origin's preflight is answered without a key and
// its requests carry the CORS headers (401 included, so a page can tell a
// missing key); another origin gets none.
func TestCORS(t *testing.T) {
	_, srv, _ := doorService(t)
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/tools/read_file/invoke", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := preflight("https://chat.example.com")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://chat.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight of an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := preflight("https://evil.example"); resp.StatusCode == http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", resp.StatusCode, resp.Header)
	}
	for _, tc := range []struct {
		h    http.Header
		code int
	}{
		{http.Header{"Origin": {"https://chat.example.com"}}, http.StatusUnauthorized},
		{http.Header{"Origin": {"https://chat.example.com"}, "Authorization": {"Bearer " + testKey}}, http.StatusOK},
	} {
		code, h, _ := get(t, srv.URL+"/openapi.json", tc.h)
		if code != tc.code || h.Get("Access-Control-Allow-Origin") != "https://chat.example.com" ||
			!strings.Contains(h.Get("Access-Control-Expose-Headers"), "X-Request-ID") {
			t.Errorf("GET with an allowed origin: %d %v", code, h)
		}
	}
	if _, h, _ := get(t, srv.URL+"/openapi.json", http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer " + testKey}}); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin got CORS headers: %v", h)
	}
}
