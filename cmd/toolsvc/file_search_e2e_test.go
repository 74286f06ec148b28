package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/walk"
)

// searchTree fills the workspace with a small project: nested sources,
// node_modules and .git folders, a symbolic link loop, and links that lead
// out of the workspace to a folder full of matching names. It returns that
// outside folder.
func searchTree(t *testing.T, s *testServer) string {
	t.Helper()
	for _, f := range []string{
		"src/main.go", "src/Util.GO", "src/lib/helper.go", "src/lib/readme.md",
		"src/lib/deep/deeper/x.go", "docs/README.md", "docs/guide.txt",
		"node_modules/pkg/index.js", "node_modules/pkg/a.go",
		".git/config", ".git/objects/ab.go",
		"file1.txt", "file2.txt", "fileA.txt", "test_one.py",
	} {
		s.writeWS(t, f, "content of "+f+"\n")
	}
	outside := filepath.Join(filepath.Dir(s.Workspace), "outside")
	if err := os.MkdirAll(filepath.Join(outside, "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"secret.go", "nested/secret2.go", "main.go"} {
		if err := os.WriteFile(filepath.Join(outside, f), []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"src/lib/loop": "..",                              // up the tree: a loop
		"self":         "self",                            // to itself
		"out":          outside,                           // out, absolute
		"docs/up":      "../../outside",                   // out, relative
		"src/leak.go":  filepath.Join(outside, "main.go"), // a file link out
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(s.Workspace, name)); err != nil {
			t.Fatal(err)
		}
	}
	return outside
}

// searchResult is a parsed file_search result.
type searchResult struct {
	total   int
	header  string
	entries []string // "[FILE] path", "[DIR] path", "[LINK] path -> target", sizes dropped
	paths   []string
	text    string
}

func parseSearch(t *testing.T, text string) searchResult {
	t.Helper()
	r := searchResult{text: text}
	lines := strings.Split(text, "\n")
	r.header = lines[0]
	f := strings.Fields(r.header)
	if len(f) < 2 || f[0] != "Found" {
		t.Fatalf("unexpected header: %q", r.header)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("header %q: %v", r.header, err)
	}
	r.total = n
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "[") {
			continue
		}
		kind, rest, _ := strings.Cut(l, " ")
		p := rest
		switch kind {
		case "[FILE]":
			if i := strings.LastIndex(rest, " ("); i >= 0 {
				p = rest[:i]
			}
		case "[LINK]":
			p, _, _ = strings.Cut(rest, " -> ")
		}
		r.entries = append(r.entries, kind+" "+p)
		r.paths = append(r.paths, p)
	}
	return r
}

func (s *testServer) search(t *testing.T, args map[string]any) searchResult {
	t.Helper()
	return parseSearch(t, mustSucceed(t, s.invoke(t, "file_search", args)))
}

// TestFileSearchParameters runs one case per parameter form and checks
// the exact entries found, in order.
func TestFileSearchParameters(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	searchTree(t, s)
	tests := []struct {
		name string
		args map[string]any
		want []string
	}{
		{"suffix pattern, files, descends into folders",
			map[string]any{"path": ".", "pattern": "*.go", "type": "file"},
			[]string{"[FILE] .git/objects/ab.go", "[FILE] node_modules/pkg/a.go", "[FILE] src/Util.GO",
				"[FILE] src/lib/deep/deeper/x.go", "[FILE] src/lib/helper.go", "[FILE] src/main.go"}},
		{"type=file finds a file four folders down (CountBot does not)",
			map[string]any{"path": "src", "pattern": "x.go", "type": "file"},
			[]string{"[FILE] src/lib/deep/deeper/x.go"}},
		{"case-insensitive literal",
			map[string]any{"path": ".", "pattern": "README.MD"},
			[]string{"[FILE] docs/README.md", "[FILE] src/lib/readme.md"}},
		{"question marks",
			map[string]any{"path": ".", "pattern": "?ile?.TXT"},
			[]string{"[FILE] file1.txt", "[FILE] file2.txt", "[FILE] fileA.txt"}},
		{"character range",
			map[string]any{"path": ".", "pattern": "file[0-9].txt"},
			[]string{"[FILE] file1.txt", "[FILE] file2.txt"}},
		{"negated set",
			map[string]any{"path": ".", "pattern": "file[!0-9].txt"},
			[]string{"[FILE] fileA.txt"}},
		{"upper-case range matches lower-case names",
			map[string]any{"path": ".", "pattern": "[E-G]*.txt", "max_depth": 0},
			[]string{"[FILE] file1.txt", "[FILE] file2.txt", "[FILE] fileA.txt"}},
		{"recursive glob habit **/ accepted",
			map[string]any{"path": "src", "pattern": "**/*.md"},
			[]string{"[FILE] src/lib/readme.md"}},
		{"folders only",
			map[string]any{"path": "src", "type": "dir"},
			[]string{"[DIR] src/lib", "[DIR] src/lib/deep", "[DIR] src/lib/deep/deeper"}},
		{"all: folders, files and links",
			map[string]any{"path": "src/lib"},
			[]string{"[DIR] src/lib/deep", "[DIR] src/lib/deep/deeper", "[FILE] src/lib/deep/deeper/x.go",
				"[FILE] src/lib/helper.go", "[LINK] src/lib/loop", "[FILE] src/lib/readme.md"}},
		{"max_depth 0: direct entries only",
			map[string]any{"path": "src", "max_depth": 0},
			[]string{"[FILE] src/Util.GO", "[LINK] src/leak.go", "[DIR] src/lib", "[FILE] src/main.go"}},
		{"max_depth 1",
			map[string]any{"path": "src", "pattern": "*.go", "max_depth": 1},
			[]string{"[FILE] src/Util.GO", "[LINK] src/leak.go", "[FILE] src/lib/helper.go", "[FILE] src/main.go"}},
		{"max_depth -1 is unlimited",
			map[string]any{"path": "src", "pattern": "*.go", "type": "file", "max_depth": -1},
			[]string{"[FILE] src/Util.GO", "[FILE] src/lib/deep/deeper/x.go", "[FILE] src/lib/helper.go", "[FILE] src/main.go"}},
		{"exclude skips entries and their subtrees",
			map[string]any{"path": ".", "pattern": "*.go", "type": "file", "exclude": []string{"node_modules", ".GIT", "deep*"}},
			[]string{"[FILE] src/Util.GO", "[FILE] src/lib/helper.go", "[FILE] src/main.go"}},
		{"exclude by extension",
			map[string]any{"path": "docs", "exclude": []string{"*.md"}},
			[]string{"[FILE] docs/guide.txt", "[LINK] docs/up"}},
		{"no match",
			map[string]any{"path": ".", "pattern": "*.rs"},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.search(t, tt.args)
			if !slices.Equal(r.entries, tt.want) {
				t.Errorf("entries:\n%s\nwant:\n%s\nresult:\n%s", strings.Join(r.entries, "\n"), strings.Join(tt.want, "\n"), r.text)
			}
			if r.total != len(tt.want) {
				t.Errorf("total = %d, want %d: %s", r.total, len(tt.want), r.header)
			}
			wantHeader := fmt.Sprintf("Found %d file(s) matching '%s' in: %s", len(tt.want), strings.TrimPrefix(orDefault(tt.args["pattern"], "*"), "**/"), tt.args["path"])
			if r.header != wantHeader {
				t.Errorf("header = %q, want %q", r.header, wantHeader)
			}
			if len(tt.want) == 0 && !strings.Contains(r.text, "Next:") {
				t.Errorf("an empty result should say what to try next: %s", r.text)
			}
		})
	}
}

func orDefault(v any, def string) string {
	if s, ok := v.(string); ok {
		return s
	}
	return def
}

// TestFileSearchSizes checks the [FILE] line format with its size.
func TestFileSearchSizes(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	s.writeWS(t, "data/big.bin", strings.Repeat("x", 3000))
	s.writeWS(t, "data/small.txt", "hello")
	text := mustSucceed(t, s.invoke(t, "file_search", map[string]any{"path": "data"}))
	for _, want := range []string{"[FILE] data/big.bin (2.9 KiB)", "[FILE] data/small.txt (5 B)"} {
		if !strings.Contains(text, want+"\n") && !strings.HasSuffix(text, want) {
			t.Errorf("result lacks %q:\n%s", want, text)
		}
	}
}

// TestFileSearchLimitAndOrder checks that the total counts every match,
// that only the first `limit` in path order are shown with a note, and that
// the order is the same on every call although the walk is parallel.
func TestFileSearchLimitAndOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"SEARCH_WORKERS": "4"})
	var all []string
	for i := range 150 {
		rel := fmt.Sprintf("d%d/s%d/f%03d.log", i%7, i%3, i)
		s.writeWS(t, rel, "x")
		all = append(all, rel)
	}
	slices.SortFunc(all, walk.Compare)

	for _, limit := range []int{1, 20, 100} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var first []string
			for range 4 {
				r := s.search(t, map[string]any{"path": ".", "pattern": "*.LOG", "limit": limit})
				if r.total != 150 {
					t.Errorf("total = %d, want 150", r.total)
				}
				if !slices.Equal(r.paths, all[:limit]) {
					t.Fatalf("shown:\n%v\nwant the first %d by path:\n%v", r.paths, limit, all[:limit])
				}
				want := fmt.Sprintf("Only the first %d (sorted by path) are shown. Next:", limit)
				if !strings.Contains(r.text, want) {
					t.Errorf("no truncation note %q:\n%s", want, r.text)
				}
				if first != nil && !slices.Equal(first, r.paths) {
					t.Errorf("order changed between calls")
				}
				first = r.paths
			}
		})
	}
	t.Run("default limit 20", func(t *testing.T) {
		r := s.search(t, map[string]any{"path": "."})
		if len(r.paths) != 20 || r.total != 150+7+21 {
			t.Errorf("shown %d of %d, want 20 of %d", len(r.paths), r.total, 150+7+21)
		}
	})
	t.Run("everything fits: no note", func(t *testing.T) {
		r := s.search(t, map[string]any{"path": "d0/s0", "limit": 100})
		if strings.Contains(r.text, "Only the first") || r.total != len(r.paths) {
			t.Errorf("unexpected note or count:\n%s", r.text)
		}
	})
}

// TestFileSearchSymlinks checks that links are listed and never followed:
// a loop does not repeat the tree, and links out of the workspace show up
// as links while nothing behind them is read or counted.
func TestFileSearchSymlinks(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	searchTree(t, s)
	r := s.search(t, map[string]any{"path": ".", "limit": 100})
	for _, p := range r.paths {
		if strings.Contains(p, "secret") || strings.HasPrefix(p, "out/") || strings.Contains(p, "loop/") || strings.HasPrefix(p, "docs/up/") {
			t.Errorf("a symbolic link was followed: %s", p)
		}
	}
	for _, want := range []string{"[LINK] src/lib/loop", "[LINK] self", "[LINK] out", "[LINK] docs/up", "[LINK] src/leak.go"} {
		if !slices.Contains(r.entries, want) {
			t.Errorf("link %q not listed:\n%s", want, r.text)
		}
	}
	if !strings.Contains(r.text, "[LINK] src/lib/loop -> ..") {
		t.Errorf("a link should show its target:\n%s", r.text)
	}
	// Counting: the tree has 15 files, 9 folders and 5 links; a followed
	// link would add the outside folder's entries or loop.
	if r.total != 15+9+5 {
		t.Errorf("total = %d, want %d:\n%s", r.total, 15+9+5, r.text)
	}

	t.Run("type=file and type=dir leave links out", func(t *testing.T) {
		for _, typ := range []string{"file", "dir"} {
			r := s.search(t, map[string]any{"path": ".", "type": typ, "limit": 100})
			for _, e := range r.entries {
				if strings.HasPrefix(e, "[LINK]") {
					t.Errorf("type=%s listed %s", typ, e)
				}
			}
		}
	})
	t.Run("a link out as the search root is refused", func(t *testing.T) {
		for _, p := range []string{"out", "docs/up", "out/nested", "src/leak.go"} {
			mustFail(t, s.invoke(t, "file_search", map[string]any{"path": p}), "path_denied", "outside the workspace")
		}
	})
	t.Run("a link inside as the search root is searched", func(t *testing.T) {
		r := s.search(t, map[string]any{"path": "src/lib/loop", "pattern": "main.go"})
		if r.total != 1 || !slices.Equal(r.paths, []string{"src/lib/loop/main.go"}) {
			t.Errorf("searching through an inside link: %s", r.text)
		}
	})
}

// TestFileSearchRoots checks how the search root is confined and resolved.
func TestFileSearchRoots(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	searchTree(t, s)
	t.Run("absolute path inside the workspace", func(t *testing.T) {
		r := s.search(t, map[string]any{"path": filepath.Join(s.Workspace, "src"), "pattern": "main.go"})
		if !slices.Equal(r.paths, []string{"src/main.go"}) {
			t.Errorf("paths should be relative to the workspace: %s", r.text)
		}
	})
	t.Run("default: the workspace itself", func(t *testing.T) {
		r := s.search(t, map[string]any{"path": "", "pattern": "main.go"})
		if !slices.Equal(r.paths, []string{"src/main.go"}) {
			t.Errorf("%s", r.text)
		}
	})
	for _, tt := range []struct{ name, path, code, msg string }{
		{"absolute path outside", "/etc", "path_denied", "outside the workspace"},
		{"dot-dot out", "../outside", "path_denied", "outside the workspace"},
		{"home", "~/", "path_denied", "'~'"},
		{"missing folder", "nope/missing", "not_found", "does not exist"},
		{"a file", "src/main.go", "invalid_arguments", "is a file, not a folder"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mustFail(t, s.invoke(t, "file_search", map[string]any{"path": tt.path}), tt.code, tt.msg, "Next:")
		})
	}
}

// TestFileSearchInvalidArguments checks the schema bounds and pattern
// syntax errors.
func TestFileSearchInvalidArguments(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	for _, tt := range []struct {
		name string
		args string
		msg  string
	}{
		{"path missing", `{}`, "path"},
		{"limit 0", `{"path":".","limit":0}`, "limit"},
		{"limit 101", `{"path":".","limit":101}`, "limit"},
		{"max_depth -2", `{"path":".","max_depth":-2}`, "max_depth"},
		{"unknown type", `{"path":".","type":"link"}`, "type"},
		{"unknown property", `{"path":".","recursive":true}`, "recursive"},
		{"unclosed set", `{"path":".","pattern":"[abc"}`, "Next:"},
		{"path in pattern", `{"path":".","pattern":"src/*.go"}`, "Next:"},
		{"path in exclude", `{"path":".","exclude":["src/vendor"]}`, "Next:"},
		{"bad exclude", `{"path":".","exclude":["[x"]}`, "Next:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mustFail(t, s.invoke(t, "file_search", tt.args), "invalid_arguments", tt.msg)
		})
	}
}

// TestFileSearchUnreadableFolder checks that a folder the service may not
// read is counted in a note and does not fail the search. Root reads
// everything, so as root the test runs itself again as user nobody.
func TestFileSearchUnreadableFolder(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		runAsNobody(t, "TestFileSearchUnreadableFolder")
		return
	}
	s := startServer(t, nil)
	s.writeWS(t, "ok/a.txt", "a")
	s.writeWS(t, "locked/b.txt", "b")
	s.writeWS(t, "locked2/c.txt", "c")
	for _, d := range []string{"locked", "locked2"} {
		dir := filepath.Join(s.Workspace, d)
		if err := os.Chmod(dir, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	r := s.search(t, map[string]any{"path": ".", "pattern": "*.txt"})
	if !slices.Equal(r.paths, []string{"ok/a.txt"}) {
		t.Errorf("paths = %v", r.paths)
	}
	if !strings.Contains(r.text, "2 folders could not be read") {
		t.Errorf("no count of unreadable folders:\n%s", r.text)
	}
	t.Run("an unreadable root is an error", func(t *testing.T) {
		mustFail(t, s.invoke(t, "file_search", map[string]any{"path": "locked"}), "path_denied", "permission denied")
	})
}

// runAsNobody runs the named test again in a copy of this test binary as
// user nobody, where file permissions apply, and fails if it fails.
func runAsNobody(t *testing.T, name string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary usually sits in a folder only root may enter.
	dir, err := os.MkdirTemp("", "nobody-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test.bin")
	// Copied by cp, not written from here: a command another test starts
	// meanwhile would inherit the file open for writing for a moment, and
	// running it would then fail with "text file busy".
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("copying the test binary: %v: %s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^"+name+"$", "-test.v")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.TempDir(), childVar + "=1"}
	if err := asUser(cmd, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("as nobody, the test did not pass:\n%s", out)
	}
}
