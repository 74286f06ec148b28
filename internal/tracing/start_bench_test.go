package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
