package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/walk"
	"github.com/countbot/toolsvc/internal/workspace"
)

func searchWorkspace(t *testing.T) *workspace.Workspace {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"a/one.go", "a/b/two.go", "c/three.txt"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// TestFileSearchBudgetGivesPartialResult checks that a search cut by its
// own time budget still answers, marked partial, while a canceled call is
// an error.
func TestFileSearchBudgetGivesPartialResult(t *testing.T) {
	ws := searchWorkspace(t)
	args := json.RawMessage(`{"path":".","pattern":"*.go"}`)

	out, err := NewFileSearch(ws, 2, time.Nanosecond).Execute(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Found at least ", "results are partial", "Next:"} {
		if !strings.Contains(out, want) {
			t.Errorf("result lacks %q:\n%s", want, out)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewFileSearch(ws, 2, time.Minute).Execute(ctx, args); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled call: err = %v, want context.Canceled", err)
	}

	out, err = NewFileSearch(ws, 2, time.Minute).Execute(context.Background(), args)
	if err != nil || !strings.HasPrefix(out, "Found 2 file(s) matching '*.go' in: .\n") {
		t.Errorf("full search: %v\n%s", err, out)
	}
}

// TestFileSearchTimeoutCoversBudget checks that the registry's deadline
// comes after the search's own budget.
func TestFileSearchTimeoutCoversBudget(t *testing.T) {
	fs := NewFileSearch(nil, 0, 30*time.Second)
	if fs.Timeout() <= 30*time.Second {
		t.Errorf("Timeout() = %s, want more than the 30s budget", fs.Timeout())
	}
}

func TestSearchQueryDefaults(t *testing.T) {
	q, err := newSearchQuery(fileSearchArgs{Path: "."})
	if err != nil {
		t.Fatal(err)
	}
	if q.kind != "all" || q.maxDepth != -1 || q.limit != 20 || q.pattern.String() != "*" {
		t.Errorf("defaults: kind %s, max_depth %d, limit %d, pattern %s", q.kind, q.maxDepth, q.limit, q.pattern)
	}
	for _, k := range []walk.Kind{walk.File, walk.Dir, walk.Link, walk.Other} {
		if !q.wants(k) {
			t.Errorf("type=all should want kind %d", k)
		}
	}
}
