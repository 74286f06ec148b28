package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkCall measures what one call costs the audit log (a journal line
// and a record file), beside its parts alone, and what syncing the journal
// line to the disk at every call would add. "after a pause" waits two
// milliseconds, untimed, before each call, as the tool's own work would:
// the file made ahead for the next record is then ready. The folder is a
// temporary one, or AUDIT_BENCH_DIR (to compare file systems).
//
//	go test -run '^$' -bench Call ./internal/audit/
func BenchmarkCall(b *testing.B) {
	for _, c := range []struct {
		name  string
		start bool
		sync  bool
		final bool
		pause bool
	}{
		{"start+finish", true, false, true, false},
		{"start+finish without the chain", true, false, true, false},
		{"start+finish after a pause", true, false, true, true},
		{"record file only", false, false, true, false},
		{"journal line only", true, false, false, false},
		{"journal line+fdatasync", true, true, false, false},
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
			if strings.HasSuffix(c.name, "without the chain") {
				l.chain.close()
				l.chain = nil
			}
			rec := Record{Timestamp: time.Now(), ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}
			for i := 0; b.Loop(); i++ {
				rec.CallID = fmt.Sprint(i)
				if c.pause {
					b.StopTimer()
					time.Sleep(2 * time.Millisecond)
					b.StartTimer()
				}
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
