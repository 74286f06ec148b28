package registry

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// richArgs is the typed form of richSchema, as a tool declares it.
type richArgs struct {
	Name  string   `json:"name"`
	Count *int     `json:"count"`
	Ratio *float64 `json:"ratio"`
	Flag  *bool    `json:"flag"`
	Color string   `json:"color"`
	Tags  []string `json:"tags"`
	Opts  *struct {
		Depth int `json:"depth"`
		Inner *struct {
			X float64 `json:"x"`
		} `json:"inner"`
	} `json:"opts"`
	Items []struct {
		ID int `json:"id"`
	} `json:"items"`
}

// FuzzInvokeArguments sends arbitrary argument bytes through Invoke to a tool
// that decodes them into its typed struct. Invoke must never panic, every
// outcome must be a well-formed result, and arguments the schema accepts
// must always decode (3.0 into an int included), or, for an integer too
// large for its Go type, fail with a message saying so.
func FuzzInvokeArguments(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"name":"ab"}`, `{"name":"abc","count":3,"ratio":0.5,"flag":true,"color":"red"}`,
		`{"name":"ab","tags":["a","b"],"opts":{"depth":0,"inner":{"x":1.5}},"items":[{"id":1}]}`,
		`{"name":"ab","count":1.0}`, `{"name":"ab","count":10e-1}`, `{"name":"ab","opts":{"depth":1e2}}`,
		`{"name":"ab","items":[{"id":-0}]}`, `{"name":"ab","opts":{"depth":1e30}}`,
		`{"name":"ab","name":"x"}`, `{"name":"ab","count":"3"}`, `{"name":null}`, `[]`, `"x"`, `{"name":"ab"`,
		`{"name":"\ud800ab"}`, `{"name":"ab","extra":1}`, "\xff\xfe{}", `{"name":"ab"} {}`, `  {"name":"ab"}  `,
	} {
		f.Add([]byte(s))
	}
	var decodeFailed atomic.Value
	r := New(Options{})
	if err := r.Register(&fakeTool{name: "rich", schema: richSchema, run: func(ctx context.Context, args json.RawMessage) (string, error) {
		if _, err := Decode[richArgs](args); err != nil {
			decodeFailed.Store(err.Error())
			return "", err
		}
		return "ok", nil
	}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		decodeFailed.Store("")
		res := r.Invoke(context.Background(), "rich", args, Meta{})
		// An integer the schema accepts may still be too large for the
		// Go type (opts.depth has no maximum): that must be said plainly.
		if msg := decodeFailed.Load().(string); msg != "" && (strings.Contains(msg, "cannot unmarshal") || strings.Contains(msg, "json:") || strings.Contains(msg, "Go ")) {
			t.Fatalf("arguments %q passed the schema but the typed decode failed: %s", args, msg)
		}
		switch res.Status {
		case StatusSuccess:
			if res.Error != nil || res.Result != "ok" {
				t.Fatalf("success result malformed: %+v", res)
			}
		case StatusError:
			if res.Error == nil || !slices.Contains(toolerr.Codes(), res.Error.Code) || !strings.HasPrefix(res.Result, "Error: ") || res.Error.Message == "" {
				t.Fatalf("error result malformed: %+v", res)
			}
		default:
			t.Fatalf("status %q for %q", res.Status, args)
		}
		if res.CallID == "" || res.Tool != "rich" {
			t.Fatalf("result without call id or tool: %+v", res)
		}
	})
}
