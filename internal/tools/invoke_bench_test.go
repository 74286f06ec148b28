package tools

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tracing"
	"github.com/countbot/toolsvc/internal/workspace"
)

// BenchmarkInvokeReadFile measures a whole call of read_file on a small file
// through the registry (validation, deadline, audit), with the audit log on
// and off, and with the audit log off for a key whose policy gives it a
// folder of its own (the call's workspace is that folder). Compare them in
// one run:
//
//	go test -run '^$' -bench InvokeReadFile -benchmem ./internal/tools/
//
// The traces=otlp cases send each call's span with the SDK's batching
// OTLP/HTTP exporter to a receiver on loopback in this process, which
// reads and drops them: the cost of TOOLSVC_OTEL_ENDPOINT set, the
// exporter's work on its own goroutine included; sampled=0.01 keeps one
// trace in a hundred (OTEL_TRACES_SAMPLER=parentbased_traceidratio). The
// times of these cases move with what else the machine runs (the
// exporter's goroutine competes for the processors); instructions per
// call, under valgrind's callgrind, do not:
//
//	GOMAXPROCS=1 GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 valgrind --tool=callgrind \
//	  ./tools.test -test.run '^$' -test.bench 'InvokeReadFile/audit=off$' -test.benchtime 3000x
//
// (the difference of a 3000x and a 1000x run, over 2000, is a call's).
func BenchmarkInvokeReadFile(b *testing.B) {
	for _, c := range []struct {
		name                    string
		auditOn, folder, holder bool
		traced, discard         bool
		sampled                 string // OTEL_TRACES_SAMPLER_ARG of a traceidratio sampler; "sync" with discard: the simple processor
	}{{"audit=off", false, false, false, false, false, ""}, {"audit=on", true, false, false, false, false, ""}, {"audit=off,folder", false, true, false, false, false, ""},
		// Approval rules in force that do not name read_file: what every
		// call that needs no approval pays for the hold point.
		{"audit=off,approvals", false, false, true, false, false, ""},
		{"audit=off,traces=otlp", false, false, false, true, false, ""}, {"audit=on,traces=otlp", true, false, false, true, false, ""},
		// The SDK's spans batched and dropped, not encoded nor sent: the
		// floor of the official SDK, whatever the exporter.
		{"audit=off,traces=discard", false, false, false, true, true, ""},
		// The same handed to the exporter on the caller's goroutine (the
		// SDK's simple processor): the spans' own making, without the
		// batching processor's hand-over to its goroutine.
		{"audit=off,traces=discard,sync", false, false, false, true, true, "sync"},
		// One call in a hundred traced, as a busy service samples.
		{"audit=off,traces=otlp,sampled=0.01", false, false, false, true, false, "0.01"},
		{"audit=on,traces=otlp,sampled=0.01", true, false, false, true, false, "0.01"}} {
		auditOn := c.auditOn
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			ws, err := workspace.Open(filepath.Join(dir, "ws"), true)
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Close()
			file := filepath.Join(ws.Dir(), "small.txt")
			opts := registry.Options{Log: zerolog.Nop()}
			meta := registry.Meta{}
			if c.folder {
				opts.Policy, meta.Key = folderPolicy{}, "bob"
				file = filepath.Join(ws.Dir(), "t", "bob", "small.txt")
				os.MkdirAll(filepath.Dir(file), 0o700)
			}
			os.WriteFile(file, []byte(strings.Repeat("hello\n", 10)), 0o644)
			if auditOn {
				al, err := audit.New(audit.Options{Dir: filepath.Join(dir, "audit")})
				if err != nil {
					b.Fatal(err)
				}
				defer al.Close()
				opts.Audit = al
			}
			switch {
			case c.discard:
				proc := sdktrace.WithBatcher(discardExporter{})
				if c.sampled == "sync" {
					proc = sdktrace.WithSyncer(discardExporter{})
				}
				tp := sdktrace.NewTracerProvider(proc)
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts.Tracer = tracing.NewWithProvider(tp, tracing.Options{})
			case c.traced:
				if c.sampled != "" {
					b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
					b.Setenv("OTEL_TRACES_SAMPLER_ARG", c.sampled)
				}
				opts.Tracer = benchTracer(b)
			}
			reg := registry.New(opts)
			if c.holder {
				store, err := approval.OpenFileStore(filepath.Join(dir, "approvals"))
				if err != nil {
					b.Fatal(err)
				}
				rules := approval.NewRules(approval.Entry{Name: "exec", Match: func(t string) bool { return t == "exec" }, Rule: approval.Rule{Kind: approval.Always}})
				reg.SetHolder(approval.New(approval.Options{Store: store, Rules: func(string) (approval.Rules, bool) { return rules, false }}))
			}
			if err := reg.Register(NewReadFile(ws, 50000, nil)); err != nil {
				b.Fatal(err)
			}
			args := []byte(`{"path":"small.txt"}`)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := reg.Invoke(ctx, "read_file", args, meta); res.Status != registry.StatusSuccess {
					b.Fatal(res.Result)
				}
			}
		})
	}
}

// benchTracer is a Tracer exporting over OTLP/HTTP to a loopback
// receiver that reads each request and answers it as a collector does;
// it is shut down (its queue sent) when the benchmark ends.
func benchTracer(b *testing.B) *tracing.Tracer {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(rcv.Close)
	tr, err := tracing.New(context.Background(), tracing.Options{Endpoint: rcv.URL})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// discardExporter drops the spans it is given.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// folderPolicy lets every key call everything, unbounded, in the folder
// t/bob (a constant, as the real policy's folders are made once).
type folderPolicy struct{}

func (folderPolicy) Allows(string, string) bool           { return true }
func (folderPolicy) SeesAll(string) bool                  { return true }
func (folderPolicy) Admit(string) (time.Duration, string) { return 0, "" }
func (folderPolicy) Release(string)                       {}
func (folderPolicy) Folder(string) string                 { return "t/bob" }
func (folderPolicy) Generation() uint64                   { return 1 }

// BenchmarkReadFileRange reads the first 100 lines of a small file and of a
// large one (64 MiB here; scripts/bench-http.sh uses 1 GiB): the cost must
// not grow with the file.
func BenchmarkReadFileRange(b *testing.B) {
	dir := b.TempDir()
	ws, err := workspace.Open(dir, true)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	line := "a line of log text that is about sixty characters long....\n"
	os.WriteFile(filepath.Join(dir, "small.txt"), []byte(strings.Repeat(line, 200)), 0o644)
	f, _ := os.Create(filepath.Join(dir, "big.txt"))
	chunk := strings.Repeat(line, 1<<14)
	for written := 0; written < 64<<20; written += len(chunk) {
		f.WriteString(chunk)
	}
	f.Close()
	tool := NewReadFile(ws, 50000, nil)
	for _, name := range []string{"small.txt", "big.txt"} {
		b.Run(name, func(b *testing.B) {
			args := []byte(`{"path":"` + name + `","start_line":1,"end_line":100}`)
			for b.Loop() {
				if _, err := tool.Execute(context.Background(), args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
