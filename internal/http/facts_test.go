package http

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/countbot/toolsvc/api"
	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/registry"
)

// The tests of this file hold together what a header that gives a call a
// fact touches: the gate's list (callHeaders), callinfo.Facts and
// api/openapi.yaml. CORS is built from the list, the registry and the
// audit record take the facts as they are (the audit package's
// TestRecordFieldNames checks every fact is recorded).

const validTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// factsOf runs a request with headers through the middleware a call takes
// (request ID, keys, door) and returns the facts the door read.
func factsOf(t *testing.T, headers map[string]string) callinfo.Facts {
	t.Helper()
	g := newGate([]Key{{Name: "alice", Secret: "alice-secret-key-0123456789"}}, context.Background(), 1)
	var got callinfo.Facts
	h := requestID(g.authenticate(g.door(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = stateFrom(r.Context()).facts
	}))))
	req := httptest.NewRequest(http.MethodPost, "/tools/x/invoke", nil)
	req.Header.Set("Authorization", "Bearer alice-secret-key-0123456789")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	return got
}

// TestEveryFactFromTheGate: each header of callHeaders fills one fact,
// and every fact is filled by a header, but Key (the name of the caller's
// key): a field added to callinfo.Facts that no door fills fails here.
func TestEveryFactFromTheGate(t *testing.T) {
	// What each header is sent as and the fact it should give, where that
	// is not the value itself.
	special := map[string][2]string{
		"traceparent": {validTraceparent, "4bf92f3577b34da6a3ce929d0e0e4736"},
	}
	// Key is the caller's key's name, Workspace its policy's folder (the
	// registry's), SpanID the call's span (the registry's, when it
	// traces): no header fills them.
	filled := map[string]string{"Key": "the caller's key", "Workspace": "the key's policy", "SpanID": "the call's span"}
	for _, h := range callHeaders() {
		send, want := "v-"+h.name, "v-"+h.name
		if s, ok := special[h.name]; ok {
			send, want = s[0], s[1]
		}
		facts := reflect.ValueOf(factsOf(t, map[string]string{h.name: send}))
		var fields []string
		for _, f := range reflect.VisibleFields(facts.Type()) {
			if facts.FieldByIndex(f.Index).String() == want {
				fields = append(fields, f.Name)
			}
		}
		if len(fields) != 1 {
			t.Errorf("header %s sent as %q: the facts holding %q are %v, want one", h.name, send, want, fields)
			continue
		}
		if by, dup := filled[fields[0]]; dup {
			t.Errorf("headers %s and %s both fill %s", by, h.name, fields[0])
		}
		filled[fields[0]] = h.name
	}
	if got := factsOf(t, nil).Key; got != "alice" {
		t.Errorf("Key = %q, want the caller's key's name", got)
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[callinfo.Facts]()) {
		if _, ok := filled[f.Name]; !ok {
			t.Errorf("no header of the gate fills callinfo.Facts.%s", f.Name)
		}
	}
}

// TestCallHeadersInContract: the operations that run calls document, as
// header parameters, exactly the headers the gate reads.
func TestCallHeadersInContract(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]any
		Components struct{ Parameters map[string]map[string]any }
	}
	if err := yaml.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, h := range callHeaders() {
		want = append(want, strings.ToLower(h.name))
	}
	slices.Sort(want)
	for _, path := range []string{"/tools/{name}/invoke", "/mcp"} {
		var got []string
		post, _ := doc.Paths[path]["post"].(map[string]any)
		params, _ := post["parameters"].([]any)
		for _, v := range params {
			p, _ := v.(map[string]any)
			if ref, ok := p["$ref"].(string); ok {
				p = doc.Components.Parameters[strings.TrimPrefix(ref, "#/components/parameters/")]
			}
			if p["in"] == "header" {
				got = append(got, strings.ToLower(p["name"].(string)))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("api/openapi.yaml: POST %s documents the headers %q; the gate reads %q", path, got, want)
		}
	}
}

// TestCORSAllowsEveryCallHeader: a preflight allows every header the gate
// reads into a call's facts, and besides them only the key, the body's
// type, Accept and MCP's headers.
func TestCORSAllowsEveryCallHeader(t *testing.T) {
	h := NewHandler(Options{Registry: registry.New(registry.Options{}), Log: zerolog.Nop(), CORSOrigins: []string{"https://app.example"}})
	req := httptest.NewRequest(http.MethodOptions, "/tools/x/invoke", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("preflight: %d", rec.Code)
	}
	allowed := strings.Split(rec.Header().Get("Access-Control-Allow-Headers"), ", ")
	others := []string{"Authorization", "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID"}
	for _, h := range callHeaders() {
		if !slices.Contains(allowed, h.name) {
			t.Errorf("CORS does not allow %s, which the gate reads", h.name)
		}
	}
	for _, a := range allowed {
		if !slices.Contains(others, a) && !slices.ContainsFunc(callHeaders(), func(h callHeader) bool { return h.name == a }) {
			t.Errorf("CORS allows %s, which nothing reads", a)
		}
	}
}

// TestTraceID: the trace ID of a well-formed traceparent; nothing from a
// malformed one, or from two.
func TestTraceID(t *testing.T) {
	cases := []struct {
		values []string
		want   string
	}{
		{[]string{validTraceparent}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{[]string{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later"}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{[]string{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{nil, ""},
		{[]string{validTraceparent, validTraceparent}, ""},
		{[]string{validTraceparent + "-x"}, ""},                                    // version 00 has four fields
		{[]string{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"}, ""}, // a later field after a dash
		{[]string{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, ""},
		{[]string{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}, ""},
		{[]string{"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, ""},
		{[]string{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, ""},
		{[]string{"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01"}, ""},
		{[]string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"}, ""},
		{[]string{"garbage"}, ""},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		for _, v := range tc.values {
			r.Header.Add("Traceparent", v)
		}
		if got := traceID(r, "Traceparent"); got != tc.want {
			t.Errorf("traceparent %q: trace ID %q, want %q", tc.values, got, tc.want)
		}
	}
}
