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
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"ratio=0.01", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))}} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithBatcher(dropper{}))
			defer tp.Shutdown(context.Background())
			tr := tracing.NewWithProvider(tp, tracing.Options{})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, span := tr.StartTool(ctx, "read_file")
				span.IDs()
				span.EndTool(tracing.ToolEnd{CallID: "c"})
			}
		})
	}
}

type dropper struct{}

func (dropper) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropper) Shutdown(context.Context) error                             { return nil }

// BenchmarkStartHTTPServer is the door's server span of a REST call,
// started and ended, kept and left out by the sampler (see StartTool).
func BenchmarkStartHTTPServer(b *testing.B) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"ratio=0.01", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))}} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithBatcher(dropper{}))
			defer tp.Shutdown(context.Background())
			red := redact.New("a-secret-of-the-service-0123456789")
			tr := tracing.NewWithProvider(tp, tracing.Options{Redact: red.String})
			r := httptest.NewRequest(http.MethodPost, "/tools/read_file/invoke", nil)
			r.RemoteAddr = "127.0.0.1:53211"
			r.Header.Set("User-Agent", "python-requests/2.32.3")
			b.ReportAllocs()
			for b.Loop() {
				_, span := tr.StartHTTPServer(r, "/tools/{name}/invoke")
				span.EndHTTP(http.StatusOK)
			}
		})
	}
}
