package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/workspace"
)

// BenchmarkInvokeReadFile measures a whole call of read_file on a small file
// through the registry (validation, deadline, audit), with the audit log on
// and off. Compare the two in one run:
//
//	go test -run '^$' -bench InvokeReadFile -benchmem ./internal/tools/
func BenchmarkInvokeReadFile(b *testing.B) {
	for _, auditOn := range []bool{false, true} {
		name := "audit=off"
		if auditOn {
			name = "audit=on"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			ws, err := workspace.Open(filepath.Join(dir, "ws"), true)
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Close()
			os.WriteFile(filepath.Join(ws.Dir(), "small.txt"), []byte(strings.Repeat("hello\n", 10)), 0o644)
			opts := registry.Options{Log: zerolog.Nop()}
			if auditOn {
				al, err := audit.New(audit.Options{Dir: filepath.Join(dir, "audit")})
				if err != nil {
					b.Fatal(err)
				}
				defer al.Close()
				opts.Audit = al
			}
			reg := registry.New(opts)
			if err := reg.Register(NewReadFile(ws, 50000, nil)); err != nil {
				b.Fatal(err)
			}
			args := []byte(`{"path":"small.txt"}`)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := reg.Invoke(ctx, "read_file", args, registry.Meta{}); res.Status != registry.StatusSuccess {
					b.Fatal(res.Result)
				}
			}
		})
	}
}

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
