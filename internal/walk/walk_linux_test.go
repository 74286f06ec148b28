package walk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// makeTree builds a small tree with nested folders, a symbolic link loop
// and a link that leads out of the tree, and returns its root.
func makeTree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{"a/b/c", "a/node_modules/x", "d", "outside"} {
		dir := filepath.Join(root, d)
		if d == "outside" {
			dir = outside
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{"top.go", "a/one.go", "a/b/two.txt", "a/b/c/three.go", "a/node_modules/x/dep.go", "d/four.md"}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.go"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"a/b/loop": "..",    // a loop back up the tree
		"self":     "self",  // a link to itself
		"out":      outside, // out of the tree
		"d/rel":    "../../outside",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

// reference lists the tree with filepath.WalkDir, which does not follow
// links either, as "path kind" lines.
func reference(t *testing.T, root string, maxDepth int, skip func(string) bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if skip != nil && skip(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		depth := strings.Count(rel, "/")
		if maxDepth >= 0 && depth > maxDepth {
			return filepath.SkipDir
		}
		k := File
		switch {
		case d.IsDir():
			k = Dir
		case d.Type()&fs.ModeSymlink != 0:
			k = Link
		}
		out = append(out, fmt.Sprintf("%s %d", rel, k))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// collect walks root and returns what was visited, sorted.
func collect(t *testing.T, root string, opt Options) ([]string, Stats, error) {
	t.Helper()
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var out []string
	opt.Visit = func(_ int, dir string, name []byte, kind Kind) {
		rel := string(name)
		if dir != "" {
			rel = dir + "/" + rel
		}
		mu.Lock()
		out = append(out, fmt.Sprintf("%s %d", rel, kind))
		mu.Unlock()
	}
	st, err := Walk(context.Background(), f, opt)
	slices.Sort(out)
	return out, st, err
}

func TestWalkMatchesReference(t *testing.T) {
	root, _ := makeTree(t)
	skipNodeModules := func(name string) bool { return name == "node_modules" }
	tests := []struct {
		name     string
		workers  int
		maxDepth int
		skip     func(string) bool
	}{
		{"one worker, unlimited", 1, -1, nil},
		{"four workers, unlimited", 4, -1, nil},
		{"depth 0", 3, 0, nil},
		{"depth 1", 3, 1, nil},
		{"skip node_modules", 2, -1, skipNodeModules},
		{"subfolders opened by path", 2, -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := Options{Workers: tt.workers, MaxDepth: tt.maxDepth}
			if tt.skip != nil {
				opt.Skip = func(name []byte) bool { return tt.skip(string(name)) }
			}
			if strings.Contains(tt.name, "by path") {
				// As when maxQueuedFDs descriptors are already queued.
				opt.openAt = func(int, string) (int, error) { return -1, unix.EMFILE }
			}
			got, st, err := collect(t, root, opt)
			if err != nil {
				t.Fatal(err)
			}
			want := reference(t, root, tt.maxDepth, tt.skip)
			if !slices.Equal(got, want) {
				t.Errorf("walk:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if st.Unreadable != 0 {
				t.Errorf("Unreadable = %d", st.Unreadable)
			}
		})
	}
}

func TestWalkNeverFollowsLinks(t *testing.T) {
	root, _ := makeTree(t)
	got, _, err := collect(t, root, Options{Workers: 2, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range got {
		if strings.Contains(line, "secret") || strings.HasPrefix(line, "out/") || strings.Contains(line, "loop/") || strings.Contains(line, "rel/") {
			t.Errorf("a link was followed: %s", line)
		}
	}
	for _, want := range []string{"a/b/loop 2", "self 2", "out 2", "d/rel 2"} {
		if !slices.Contains(got, want) {
			t.Errorf("link %q not reported as a link in %v", want, got)
		}
	}
}

func TestOpenBeneathRefusesLinks(t *testing.T) {
	root, _ := makeTree(t)
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, viaOpenat2 := range []bool{true, false} {
		w := &walker{}
		w.noOpenat2.Store(!viaOpenat2)
		for _, rel := range []string{"out", "a/b/loop", "a/b/loop/b", "d/rel", "self"} {
			t.Run(fmt.Sprintf("%s openat2=%v", rel, viaOpenat2), func(t *testing.T) {
				fd, err := w.openBeneath(int(f.Fd()), rel)
				if err == nil {
					unix.Close(fd)
					t.Fatalf("opened %s through a symbolic link", rel)
				}
			})
		}
		t.Run(fmt.Sprintf("a/b/c openat2=%v", viaOpenat2), func(t *testing.T) {
			fd, err := w.openBeneath(int(f.Fd()), "a/b/c")
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
		})
	}
}

func TestWalkCountsUnreadableFolders(t *testing.T) {
	root, _ := makeTree(t)
	opt := Options{Workers: 2, MaxDepth: -1}
	var w walker
	opt.open = func(rootFD int, rel string) (int, error) {
		if rel == "a/b" || rel == "d" {
			return -1, unix.EACCES
		}
		return w.openBeneath(rootFD, rel)
	}
	opt.openAt = func(parent int, name string) (int, error) {
		if name == "b" || name == "d" {
			return -1, unix.EACCES
		}
		return openChild(parent, name)
	}
	got, st, err := collect(t, root, opt)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unreadable != 2 {
		t.Errorf("Unreadable = %d, want 2", st.Unreadable)
	}
	if !slices.Contains(got, "a/b 1") || slices.Contains(got, "a/b/two.txt 0") {
		t.Errorf("the unreadable folder should be listed but not its content: %v", got)
	}
	if !slices.Contains(got, "a/one.go 0") {
		t.Errorf("the rest of the tree should be walked: %v", got)
	}
}

func TestWalkRootErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Walk(context.Background(), f, Options{MaxDepth: -1, Visit: func(int, string, []byte, Kind) {}})
	if !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("walking a file: err = %v, want ENOTDIR", err)
	}
}

func TestWalkStopsWhenCanceled(t *testing.T) {
	root, _ := makeTree(t)
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Walk(ctx, f, Options{MaxDepth: -1, Visit: func(int, string, []byte, Kind) {}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestWalkerIndexIsBounded(t *testing.T) {
	root, _ := makeTree(t)
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 3
	var mu sync.Mutex
	seen := map[int]bool{}
	_, err = Walk(context.Background(), f, Options{Workers: n, MaxDepth: -1, Visit: func(w int, _ string, _ []byte, _ Kind) {
		mu.Lock()
		seen[w] = true
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	for w := range seen {
		if w < 0 || w >= n {
			t.Errorf("worker index %d out of [0,%d)", w, n)
		}
	}
}

// BenchmarkWalk walks TREE (e.g. /tmp/tree200k from
// /work/shared/bench/mktree.py) matching *.go; skipped without TREE.
func BenchmarkWalk(b *testing.B) {
	root := os.Getenv("TREE")
	if root == "" {
		b.Skip("set TREE to a folder to walk")
	}
	p, _ := Compile("*.go")
	for b.Loop() {
		f, err := os.Open(root)
		if err != nil {
			b.Fatal(err)
		}
		workers, _ := strconv.Atoi(os.Getenv("WORKERS"))
		counts := make([]int, WorkerCount(workers))
		_, err = Walk(context.Background(), f, Options{Workers: workers, MaxDepth: -1, Visit: func(w int, _ string, name []byte, k Kind) {
			if k == File && p.Match(name) {
				counts[w]++
			}
		}})
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

func TestTopKeepsFirstInTreeOrder(t *testing.T) {
	paths := []string{"b", "a.go", "a/z", "a", "c/d/e", "a/b/c", "B", "a-b", "c/d"}
	sorted := slices.Clone(paths)
	slices.SortFunc(sorted, Compare)
	wantOrder := []string{"B", "a", "a/b/c", "a/z", "a-b", "a.go", "b", "c/d", "c/d/e"}
	if !slices.Equal(sorted, wantOrder) {
		t.Fatalf("tree order = %v, want %v", sorted, wantOrder)
	}
	for _, k := range []int{0, 1, 3, len(paths), 100} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			// Spread the entries over three Tops in a scrambled order, as
			// workers would see them.
			tops := []*Top{NewTop(k), NewTop(k), NewTop(k)}
			for i, p := range paths {
				dir, name := "", p
				if j := strings.LastIndexByte(p, '/'); j >= 0 {
					dir, name = p[:j], p[j+1:]
				}
				tops[(i*7)%3].Offer(dir, []byte(name), File)
			}
			count, first := Merge(k, tops...)
			if count != len(paths) {
				t.Errorf("count = %d, want %d", count, len(paths))
			}
			want := wantOrder[:min(k, len(wantOrder))]
			var got []string
			for _, m := range first {
				got = append(got, m.Path)
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("first = %v, want %v", got, want)
			}
		})
	}
}

// TestWalkWideTree walks a folder with more subfolders than maxQueuedFDs,
// so some wait opened and the rest by path, with more workers than CPUs.
func TestWalkWideTree(t *testing.T) {
	root := t.TempDir()
	for i := range maxQueuedFDs*2 + 10 {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i), "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f.go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := openFDs(t)
	got, st, err := collect(t, root, Options{Workers: 8, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after > before {
		t.Errorf("%d descriptors open after the walk, %d before", after, before)
	}
	// A walk stopped early closes the folders it had opened too.
	ctx, cancel := context.WithCancel(context.Background())
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	_, err = Walk(ctx, f, Options{Workers: 2, MaxDepth: -1, Visit: func(int, string, []byte, Kind) { once.Do(cancel) }})
	f.Close()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled walk: err = %v", err)
	}
	if after := openFDs(t); after > before {
		t.Errorf("%d descriptors open after a canceled walk, %d before", after, before)
	}
	if want := reference(t, root, -1, nil); !slices.Equal(got, want) {
		t.Errorf("got %d entries, want %d", len(got), len(want))
	}
	if st.Unreadable != 0 || st.Dirs != 1+2*(maxQueuedFDs*2+10) {
		t.Errorf("stats = %+v", st)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
