package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
)

// echoOnly lets the key "limited" call echo only.
type echoOnly struct{}

func (echoOnly) Allows(key, tool string) bool         { return key != "limited" || tool == "echo" }
func (echoOnly) SeesAll(key string) bool              { return key != "limited" }
func (echoOnly) Folder(string) string                 { return "" }
func (echoOnly) Admit(string) (time.Duration, string) { return 0, "" }
func (echoOnly) Release(string)                       {}
func (echoOnly) Generation() uint64                   { return 1 }

type keyCtx struct{}

// TestUnknownToolNamesClosest: a tools/call of a name no tool the key may
// call has is the protocol's invalid-params error, "unknown tool" and the
// name as the SDK says it, with the closest tools the key may call; plain
// calls and calls with _meta (which the SDK decodes) alike. A tool the key
// may not call is answered as a name no tool has.
func TestUnknownToolNamesClosest(t *testing.T) {
	reg := registry.New(registry.Options{Policy: echoOnly{}})
	for _, tool := range []registry.Tool{echoTool{}, sayTool{}} {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	h := NewHandler(Options{Registry: reg, Version: "test", MaxBodyBytes: 1 << 20,
		Key: func(ctx context.Context) string { k, _ := ctx.Value(keyCtx{}).(string); return k },
		Invoke: func(ctx context.Context, t registry.Target, args []byte) (registry.Result, string) {
			return reg.InvokeTarget(ctx, t, args, registry.Meta{}), ""
		}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r = r.WithContext(context.WithValue(r.Context(), keyCtx{}, r.Header.Get("X-Test-Key")))
		h.ServeBody(w, r, body)
	}))
	defer srv.Close()
	for _, tc := range []struct{ key, name, want string }{
		{"", "ecoh", `unknown tool "ecoh"; did you mean echo?`},
		{"", "sya", `unknown tool "sya"; did you mean say?`},
		{"", "nothing_like_it", `unknown tool "nothing_like_it"`},
		{"limited", "ecoh", `unknown tool "ecoh"; did you mean echo?`},
		{"limited", "sya", `unknown tool "sya"`},
		{"limited", "say", `unknown tool "say"`},
	} {
		for _, meta := range []string{"", `,"_meta":{"progressToken":"p1"}`} {
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.name + `","arguments":{}` + meta + `}}`
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			req.Header.Set("X-Test-Key", tc.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var answer struct {
				Error struct {
					Code    int
					Message string
				}
			}
			if err := json.Unmarshal(b, &answer); err != nil || answer.Error.Code != -32602 || answer.Error.Message != tc.want {
				t.Errorf("%s calls %s%s: %s, want -32602 %q", tc.key, tc.name, meta, b, tc.want)
			}
		}
	}
}
