package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/tracing"
)

// BenchmarkStartTool is a tool span's own cost, started and ended, with
// spans kept (batched, dropped) and with the sampler leaving out 99 in a
// hundred: what a call pays inline, before any export.
func BenchmarkStartTool(b *testing.B) {
	eachSampler(b, tracing.Options{}, func(b *testing.B, tr *tracing.Tracer) {
		ctx := context.Background()
		for b.Loop() {
			_, span := tr.StartTool(ctx, "read_file")
			span.IDs()
			span.EndTool(tracing.ToolEnd{CallID: "c"})
		}
	})
}

// BenchmarkStartHTTPServer is the door's server span of a REST call,
// started and ended, kept and left out by the sampler (as StartTool).
func BenchmarkStartHTTPServer(b *testing.B) {
	red := redact.New("a-secret-of-the-service-0123456789")
	eachSampler(b, tracing.Options{Redact: red.String}, func(b *testing.B, tr *tracing.Tracer) {
		r := httptest.NewRequest(http.MethodPost, "/tools/read_file/invoke", nil)
		r.RemoteAddr = "127.0.0.1:53211"
		r.Header.Set("User-Agent", "python-requests/2.32.3")
		for b.Loop() {
			_, span := tr.StartHTTPServer(r, "/tools/{name}/invoke")
			span.EndHTTP(http.StatusOK)
		}
	})
}

// eachSampler runs body as two sub-benchmarks: with a Tracer (options o)
// whose spans are all kept, batched and dropped, and with one whose
// sampler leaves out 99 traces in a hundred.
func eachSampler(b *testing.B, o tracing.Options, body func(*testing.B, *tracing.Tracer)) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"ratio=0.01", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))}} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithBatcher(dropper{}))
			defer tp.Shutdown(context.Background())
			b.ReportAllocs()
			body(b, tracing.NewWithProvider(tp, o))
		})
	}
}

type dropper struct{}

func (dropper) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropper) Shutdown(context.Context) error                             { return nil }
