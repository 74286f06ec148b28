package tools

import (
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/memory"
)

// TestMemoryHeaderCounts: the header of read says "1 entry in 1 line",
// not "1 lines", and counts above one in the plural.
func TestMemoryHeaderCounts(t *testing.T) {
	for _, tc := range []struct {
		st   memory.Stats
		want string
	}{
		{memory.Stats{Exists: true, Lines: 1, Entries: 1, First: "2026-12-07", Last: "2026-12-07"}, "memory/MEMORY.md: 1 entry in 1 line, dated"},
		{memory.Stats{Exists: true, Lines: 3, Entries: 2, First: "2026-12-07", Last: "2026-12-08"}, "memory/MEMORY.md: 2 entries in 3 lines, dated"},
	} {
		var b strings.Builder
		writeMemoryHeader(&b, tc.st, nil, false, 0)
		if !strings.HasPrefix(b.String(), tc.want) {
			t.Errorf("%+v: header %q, want it to start %q", tc.st, b.String(), tc.want)
		}
	}
}
