package http

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tools"
	"github.com/countbot/toolsvc/internal/workspace"
)

// BenchmarkInvokeHandler runs read_file of a small file through the whole
// HTTP handler (router, middleware, access log through the redacting
// writer, registry, audit log), without the network, beside a bare handler
// that reads the same file and writes one small file per call the way the
// audit log does (the floor of a file per call, as scripts/barehttp does).
// The ratio of the two is the Go-side share of the whole-process figure of
// scripts/bench-http.sh. Put TMPDIR on the file system to measure:
//
//	go test -run '^$' -bench InvokeHandler -benchmem ./internal/http/
func BenchmarkInvokeHandler(b *testing.B) {
	dir := b.TempDir()
	ws, err := workspace.Open(filepath.Join(dir, "ws"), true)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	small := strings.Repeat("hello\n", 10)
	if err := os.WriteFile(filepath.Join(ws.Dir(), "small.txt"), []byte(small), 0o644); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"path":"small.txt"}`)
	serve := func(b *testing.B, h http.Handler, path string) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatal(rec.Code, rec.Body.String())
			}
		}
	}
	b.Run("bare+file", func(b *testing.B) {
		day := filepath.Join(dir, "bare", time.Now().UTC().Format("2006-01-02"))
		if err := os.MkdirAll(day, 0o750); err != nil {
			b.Fatal(err)
		}
		dfd, err := unix.Open(day, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(dfd)
		serve(b, bareFileHandler(ws.Dir(), dfd), "/")
	})
	for _, auditOn := range []bool{true, false} {
		name := "toolsvc,audit=off"
		if auditOn {
			name = "toolsvc,audit=on"
		}
		b.Run(name, func(b *testing.B) {
			red := redact.New("a-configured-secret-value")
			log := zerolog.New(red.Writer(io.Discard)).With().Timestamp().Logger()
			opts := registry.Options{Log: log, Redact: red.String, RedactProgress: red.Progress}
			if auditOn {
				al, err := audit.New(audit.Options{Dir: filepath.Join(dir, "audit-"+name), Log: log})
				if err != nil {
					b.Fatal(err)
				}
				defer al.Close()
				opts.Audit = al
			}
			reg := registry.New(opts)
			if err := reg.Register(tools.NewReadFile(ws, 50000, nil)); err != nil {
				b.Fatal(err)
			}
			h := NewHandler(Options{Registry: reg, Log: log, Stopping: context.Background()})
			serve(b, h, "/tools/read_file/invoke")
		})
	}
}

// bareFileHandler is scripts/barehttp's handler with -files.
func bareFileHandler(root string, dfd int) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var req struct {
			Path string `json:"path"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), 400)
			return
		}
		data, err := os.ReadFile(filepath.Join(root, req.Path))
		if err != nil {
			http.Error(rw, err.Error(), 404)
			return
		}
		rec, _ := json.Marshal(map[string]any{"tool_name": "read_file", "arguments": req, "timestamp": start.UTC(),
			"status": "success", "result": string(data), "duration_ms": time.Since(start).Milliseconds()})
		var rnd [16]byte
		rand.Read(rnd[:])
		name := start.UTC().Format("20060102T150405.000000000Z") + "_" + hex.EncodeToString(rnd[:]) + ".json"
		fd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
		if err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		defer unix.Close(fd)
		if _, err := unix.Write(fd, append(rec, '\n')); err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		if err := unix.Linkat(fd, "", dfd, name, unix.AT_EMPTY_PATH); err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(map[string]string{"result": string(data)})
	})
}
