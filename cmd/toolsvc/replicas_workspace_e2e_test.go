package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentEditsAcrossReplicas runs two services on one workspace,
// as replicas sharing a volume do, the second in a process of its own, and
// makes many edits of one file at once through both: every edit's change
// is in the file at the end, none dropped by another edit that read the
// file before it was written.
func TestConcurrentEditsAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := startServer(t, nil)
	b := startServer(t, map[string]string{"WORKSPACE": a.Workspace}, asProcess())
	if err := os.WriteFile(filepath.Join(a.Workspace, "log.md"), []byte("ANCHOR\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const perReplica = 16
	var wg sync.WaitGroup
	for _, s := range []*testServer{a, b} {
		name := "a"
		if s == b {
			name = "b"
		}
		for i := range perReplica {
			wg.Go(func() {
				res := s.invoke(t, "edit_file", map[string]any{"path": "log.md", "old_str": "ANCHOR\n", "new_str": fmt.Sprintf("ANCHOR\n%s-%d\n", name, i)})
				if res.Status != "success" {
					t.Errorf("edit %s-%d: %s", name, i, res.Result)
				}
			})
		}
	}
	wg.Wait()
	got, err := os.ReadFile(filepath.Join(a.Workspace, "log.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, name := range []string{"a", "b"} {
		for i := range perReplica {
			if !strings.Contains(string(got), fmt.Sprintf("\n%s-%d\n", name, i)) {
				lost = append(lost, fmt.Sprintf("%s-%d", name, i))
			}
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d edits lost: %v\n%s", len(lost), 2*perReplica, lost, got)
	}
}
