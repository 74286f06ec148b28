package audit

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkCall writes what one call costs the audit log: a pending record
// linked into place, then the final record renamed over it. The parts are
// measured alone beside it.
//
//	go test -run '^$' -bench . ./internal/audit/
func BenchmarkCall(b *testing.B) {
	for _, c := range []struct {
		name     string
		statuses []string
	}{
		{"pending+final", []string{"pending", "success"}},
		{"pending only (link)", []string{"pending"}},
		{"final only (rename)", []string{"success"}},
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
					rec.Status = st
					if err := l.Write(rec); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
