// Package tracingtest gives tests what they check the service's traces
// with: a loopback OTLP/HTTP receiver built on the official OTLP protobuf
// definitions (go.opentelemetry.io/proto/otlp), and the OpenTelemetry
// semantic conventions' YAML (../testdata/semconv) read into a checker of
// span names, kinds and attributes.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Span is one span as the receiver got it.
type Span struct {
	TraceID, SpanID, ParentSpanID string // lower-case hex; ParentSpanID "" for a root
	Name                          string
	// Kind is SERVER, CLIENT, INTERNAL, PRODUCER or CONSUMER.
	Kind string
	// Attrs are the span's attributes: string, int64, float64, bool,
	// []string, []int64...
	Attrs map[string]any
	// Resource holds the resource's attributes (service.name...).
	Resource map[string]any
	// StatusError: the span's status is Error, with StatusMessage.
	StatusError   bool
	StatusMessage string
}

// Receiver is an OTLP/HTTP trace receiver on a loopback port: POST
// /v1/traces with an ExportTraceServiceRequest in protobuf (or JSON), as
// the OpenTelemetry Collector's otlp receiver takes it.
type Receiver struct {
	// URL is the receiver's base URL, for TOOLSVC_OTEL_ENDPOINT.
	URL string

	mu       sync.Mutex
	spans    []Span
	requests int
}

// NewReceiver starts a receiver, stopped when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	rcv := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(rcv.serve))
	t.Cleanup(srv.Close)
	rcv.URL = srv.URL
	return rcv
}

func (rcv *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "POST /v1/traces only", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	ctype := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ctype, "application/x-protobuf"):
		err = proto.Unmarshal(data, &req)
	case strings.HasPrefix(ctype, "application/json"):
		err = protojson.Unmarshal(data, &req)
	default:
		err = fmt.Errorf("content type %q is not OTLP's", ctype)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rcv.add(&req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rcv *Receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	rcv.requests++
	for _, rs := range req.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				rcv.spans = append(rcv.spans, Span{
					TraceID:       hex.EncodeToString(sp.GetTraceId()),
					SpanID:        hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(sp.GetParentSpanId()),
					Name:          sp.GetName(),
					Kind:          strings.TrimPrefix(sp.GetKind().String(), "SPAN_KIND_"),
					Attrs:         attrMap(sp.GetAttributes()),
					Resource:      res,
					StatusError:   sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					StatusMessage: sp.GetStatus().GetMessage(),
				})
			}
		}
	}
}

// Spans returns the spans received so far.
func (rcv *Receiver) Spans() []Span {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return append([]Span(nil), rcv.spans...)
}

// Requests counts the export requests received.
func (rcv *Receiver) Requests() int {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return rcv.requests
}

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Tree renders spans as an indented tree per trace, children under their
// parents, each line "name [kind] key=value ...": what a reader of the
// docs or of a failed test looks at.
func Tree(spans []Span) string {
	children := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentSpanID == "" || !ids[s.ParentSpanID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
	}
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s [%s]", strings.Repeat("  ", depth), s.Name, s.Kind)
		keys := make([]string, 0, len(s.Attrs))
		for k := range s.Attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, s.Attrs[k])
		}
		if s.StatusError {
			fmt.Fprintf(&b, " status=ERROR(%s)", s.StatusMessage)
		}
		b.WriteByte('\n')
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		fmt.Fprintf(&b, "trace %s (parent %s)\n", r.TraceID, orNone(r.ParentSpanID))
		walk(r, 1)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
