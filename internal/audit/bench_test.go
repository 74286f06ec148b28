package audit

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCall writes what one call costs the audit log: a pending record
// linked into place, then the final record exchanged with it. The parts are
// measured alone beside it, and "rename over" is the way that frees the
// pending file's inode at every call, for comparison. The figures depend on
// what else freed inodes on the file system in the last minutes.
//
//	go test -run '^$' -bench . ./internal/audit/
func BenchmarkCall(b *testing.B) {
	for _, c := range []struct {
		name     string
		statuses []string
	}{
		{"pending+final", []string{"pending", "success"}},
		{"pending only (link)", []string{"pending"}},
		{"final only (moved in)", []string{"success"}},
		{"pending+final, rename over", []string{"pending", "rename over"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			l, err := New(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rec := Record{Timestamp: time.Now(), ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`), Result: "hello"}
			for i := 0; b.Loop(); i++ {
				rec.CallID = fmt.Sprint(i)
				for _, st := range c.statuses {
					if st == "rename over" {
						rel := FileName(rec)
						dir, _ := l.dir(filepath.Dir(rel))
						if err := replace(dir, filepath.Base(rel), []byte(`{"status":"success"}`)); err != nil {
							b.Fatal(err)
						}
						continue
					}
					rec.Status = st
					if err := l.Write(rec); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
