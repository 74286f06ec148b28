package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

// BenchmarkCall measures what one call costs the audit log (a journal line
// and a record file), beside its parts alone, and what syncing the journal
// line to the disk at every call would add. The folder is a temporary one,
// or AUDIT_BENCH_DIR (to compare file systems).
//
//	go test -run '^$' -bench Call ./internal/audit/
func BenchmarkCall(b *testing.B) {
	for _, c := range []struct {
		name  string
		start bool
		sync  bool
		final bool
	}{
		{"start+finish", true, false, true},
		{"record file only", false, false, true},
		{"journal line only", true, false, false},
		{"journal line+fdatasync", true, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir, err := os.MkdirTemp(os.Getenv("AUDIT_BENCH_DIR"), "auditbench")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			l, err := New(Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rec := Record{Timestamp: time.Now(), ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}
			for i := 0; b.Loop(); i++ {
				rec.CallID = fmt.Sprint(i)
				var st Started
				if c.start {
					if st, err = l.Start(rec); err != nil {
						b.Fatal(err)
					}
					if c.sync {
						if err := st.seg.f.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if c.final {
					rec.Status, rec.Result = "success", "hello"
					if err := l.Finish(st, rec); err != nil {
						b.Fatal(err)
					}
				} else {
					st.seg.release()
				}
			}
		})
	}
}
