package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newStore returns a store over a fresh workspace, dated 2026-12-02.
func newStore(t testing.TB) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	day := time.Date(2026, 12, 2, 10, 0, 0, 0, time.Local)
	return New(root, Options{Now: func() time.Time { return day }}), dir
}

func writeFile(t testing.TB, dir, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, Path), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, Path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func texts(lines []Line) []string {
	var out []string
	for _, l := range lines {
		out = append(out, fmt.Sprintf("[%d] %s", l.N, l.Text))
	}
	return out
}

func TestWriteFormatsOneLine(t *testing.T) {
	cases := []struct {
		name, source, content, want string
	}{
		{"plain", "feishu", "likes tea", "2026-12-02|feishu|likes tea"},
		{"default source", "", "x", "2026-12-02|web|x"},
		{"newlines folded", "web", "a\nb\r\nc\rd\u2028e", "2026-12-02|web|a b  c d e"},
		{"trimmed", "web", "  \n spaced \t ", "2026-12-02|web|spaced"},
		{"control chars dropped", "web", "a\x00b\x1bc", "2026-12-02|web|abc"},
		{"pipe in content kept", "web", "a|b", "2026-12-02|web|a|b"},
		{"pipe in source", "tele|gram", "x", "2026-12-02|tele/gram|x"},
		{"newline in source", "we\nb chat", "x", "2026-12-02|we_b_chat|x"},
		{"chinese", "qq", "用户喜欢喝茶", "2026-12-02|qq|用户喜欢喝茶"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newStore(t)
			w, err := s.Write(context.Background(), c.source, c.content)
			if err != nil {
				t.Fatal(err)
			}
			if w.Text != c.want || w.Line != 1 || w.Entry != 1 || w.Total != 1 {
				t.Errorf("got %+v, want text %q at line 1 of 1", w, c.want)
			}
			if got := readFile(t, dir); got != c.want+"\n" {
				t.Errorf("file = %q", got)
			}
		})
	}
	t.Run("empty after folding", func(t *testing.T) {
		s, _ := newStore(t)
		if _, err := s.Write(context.Background(), "web", " \n\r\t "); !errors.Is(err, ErrEmpty) {
			t.Fatalf("err = %v, want ErrEmpty", err)
		}
	})
}

func TestWriteCountsEntries(t *testing.T) {
	s, dir := newStore(t)
	writeFile(t, dir, "2026-01-01|web|one\n\nno date here\n2026-01-02|web|two") // no final newline
	w, err := s.Write(context.Background(), "web", "three")
	if err != nil {
		t.Fatal(err)
	}
	// The hand-written last line gets its line break; the new entry is line 5.
	if w.Line != 5 || w.Entry != 4 || w.Total != 4 {
		t.Errorf("got line %d entry %d total %d, want 5 4 4", w.Line, w.Entry, w.Total)
	}
	want := "2026-01-01|web|one\n\nno date here\n2026-01-02|web|two\n2026-12-02|web|three\n"
	if got := readFile(t, dir); got != want {
		t.Errorf("file = %q, want %q", got, want)
	}
}

func TestSearch(t *testing.T) {
	s, dir := newStore(t)
	writeFile(t, dir, strings.Join([]string{
		"2026-01-01|web|User likes green TEA",              // 1
		"2026-01-02|feishu|用户喜欢喝绿茶",                        // 2
		"2026-01-03|web|Project Apollo deadline is Friday", // 3
		"",                                    // 4
		"a note without a date about tea",     // 5
		"2026-01-04|qq|Ärger mit dem Drucker", // 6
		"2026-01-05|web|tea and apollo",       // 7
		"2026-01-06|web|用户的项目叫阿波罗", // 8
	}, "\n")+"\n")
	cases := []struct {
		name  string
		kws   []string
		all   bool
		max   int
		want  []int
		total int
	}{
		{"or newest first", []string{"tea"}, false, 15, []int{7, 5, 1}, 3},
		{"case-insensitive ascii", []string{"APOLLO"}, false, 15, []int{7, 3}, 2},
		{"case-insensitive non-ascii", []string{"ärger"}, false, 15, []int{6}, 1},
		{"or of two", []string{"friday", "drucker"}, false, 15, []int{6, 3}, 2},
		{"and", []string{"tea", "apollo"}, true, 15, []int{7}, 1},
		{"and none", []string{"tea", "friday"}, true, 15, nil, 0},
		{"chinese substring", []string{"绿茶"}, false, 15, []int{2}, 1},
		{"chinese or", []string{"绿茶", "阿波罗"}, false, 15, []int{8, 2}, 2},
		{"chinese and", []string{"用户", "项目"}, true, 15, []int{8}, 1},
		{"source matches", []string{"feishu"}, false, 15, []int{2}, 1},
		{"date matches", []string{"2026-01-0"}, false, 15, []int{8, 7, 6, 3, 2, 1}, 6},
		{"max cuts newest first", []string{"2026"}, false, 2, []int{8, 7}, 6},
		{"duplicate keywords", []string{"tea", "TEA"}, true, 15, []int{7, 5, 1}, 3},
		{"no match", []string{"zebra"}, false, 15, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := s.Search(context.Background(), c.kws, c.all, c.max)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, h := range res.Hits {
				got = append(got, h.N)
			}
			if !slices.Equal(got, c.want) || res.Total != c.total {
				t.Errorf("hits %v total %d, want %v total %d", got, res.Total, c.want, c.total)
			}
		})
	}
}

func TestHandEditedFileLoads(t *testing.T) {
	content := "2026-01-01|web|first\r\n" + // 1: CRLF
		"\n" + // 2: blank
		"just a note\n" + // 3: no separators
		"2026-01-02 web first\n" + // 4: no separators, has a date
		"2026-13-45|web|bad date\n" + // 5: impossible date
		"2026-01-03|web\n" + // 6: one separator
		"   \n" + // 7: blank (spaces)
		"2026-01-04|web|last" // no final newline: ignored and reported
	s, dir := newStore(t)
	writeFile(t, dir, content)
	lines, st, err := s.Range(context.Background(), 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lines != 7 || st.Entries != 5 || st.First != "2026-01-01" || st.Last != "2026-01-01" || st.Unterminated != len("2026-01-04|web|last") {
		t.Errorf("stats %+v", st)
	}
	if !slices.Equal(st.Malformed, []int{3, 4, 5, 6}) || !slices.Equal(st.Blank, []int{2, 7}) {
		t.Errorf("malformed %v blank %v", st.Malformed, st.Blank)
	}
	if len(lines) != 7 || lines[0].Text != "2026-01-01|web|first" || lines[6].Text != "   " {
		t.Errorf("lines %q", texts(lines))
	}
	if !lines[2].Malformed() || lines[0].Malformed() || lines[1].Malformed() {
		t.Errorf("malformed flags wrong: %+v", lines[:3])
	}
	recent, _, err := s.Recent(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(recent); !slices.Equal(got, []string{"[4] 2026-01-02 web first", "[5] 2026-13-45|web|bad date", "[6] 2026-01-03|web"}) {
		t.Errorf("recent %q", got)
	}
	res, err := s.Search(context.Background(), []string{"note", "last"}, false, 15)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(res.Hits); !slices.Equal(got, []string{"[3] just a note"}) {
		t.Errorf("search %q", got)
	}
	if got := readFile(t, dir); got != content {
		t.Errorf("reading rewrote the file: %q", got)
	}
}

func TestIndexFollowsTheFile(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	count := func() int {
		t.Helper()
		res, err := s.Search(ctx, []string{"x"}, false, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return res.Total
	}
	if n := count(); n != 0 {
		t.Fatalf("empty store found %d", n)
	}
	other := New(s.root, Options{}) // another process's store
	for i := 0; i < 3; i++ {
		if _, err := other.Write(ctx, "web", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("after appends by another store: %d, want 3", n)
	}
	// A partial line written by someone else counts once complete, not
	// before.
	f, err := os.OpenFile(filepath.Join(dir, Path), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("2026-12-02|web|x half")
	if n := count(); n != 3 {
		t.Fatalf("with unterminated tail: %d, want 3", n)
	}
	f.WriteString(" and the rest x\n")
	f.Close()
	if n := count(); n != 4 {
		t.Fatalf("after the tail is finished: %d, want 4", n)
	}
	res, _ := s.Search(ctx, []string{"rest"}, false, 5)
	if len(res.Hits) != 1 || res.Hits[0].Text != "2026-12-02|web|x half and the rest x" {
		t.Fatalf("finished tail: %+v", res.Hits)
	}
	// Rewritten in place, growing: the lines before the end changed.
	writeFile(t, dir, strings.Repeat("2026-12-02|web|y\n", 5)+"2026-12-02|web|x\n")
	if n := count(); n != 1 {
		t.Fatalf("after an in-place rewrite: %d, want 1", n)
	}
	// Replaced by rename (a new inode), shrinking.
	tmp := filepath.Join(dir, Dir, "tmp")
	os.WriteFile(tmp, []byte("2026-12-02|web|zzz\n"), 0o644)
	if err := os.Rename(tmp, filepath.Join(dir, Path)); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("after replacement: %d, want 0", n)
	}
	// Same size, new content (hand fix of a typo): mtime changes.
	writeFile(t, dir, "2026-12-02|web|zzx\n")
	future := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, Path), future, future)
	if n := count(); n != 1 {
		t.Fatalf("after same-size edit: %d, want 1", n)
	}
	os.Remove(filepath.Join(dir, Path))
	if n := count(); n != 0 {
		t.Fatalf("after removal: %d, want 0", n)
	}
}

func TestConcurrentWritersInProcess(t *testing.T) {
	s, dir := newStore(t)
	other := New(s.root, Options{}) // a second store: only the file lock keeps them apart
	const goroutines, writes = 8, 50
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		st := s
		if g%2 == 1 {
			st = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < writes; i++ {
				if _, err := st.Write(context.Background(), "web", entryPayload(0, g, i)); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if _, err := st.Search(context.Background(), []string{"payload"}, false, 3); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	checkEntries(t, readFile(t, dir), 1, goroutines, writes)
	res, err := s.Search(context.Background(), []string{"payload"}, false, 1)
	if err != nil || res.Total != goroutines*writes {
		t.Fatalf("search total %d (%v), want %d", res.Total, err, goroutines*writes)
	}
}

// entryPayload is a long entry whose content identifies its writer and can
// be checked for tearing.
func entryPayload(proc, g, i int) string {
	id := fmt.Sprintf("p%d-g%d-i%d", proc, g, i)
	return id + " payload " + strings.Repeat(id[:2], 200) + " end-" + id
}

// checkEntries checks that text holds exactly one intact entry from each
// writer.
func checkEntries(t *testing.T, text string, procs, goroutines, writes int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if want := procs * goroutines * writes; len(lines) != want {
		t.Fatalf("%d lines, want %d", len(lines), want)
	}
	seen := make(map[string]bool)
	for n, l := range lines {
		date, src, ok := parseLine(l)
		if !ok || date != "2026-12-02" && date != time.Now().Format(DateLayout) || src != "web" {
			t.Fatalf("line %d is not an entry: %.80q", n+1, l)
		}
		content := l[len(date)+len(src)+2:]
		var p, g, i int
		if _, err := fmt.Sscanf(content, "p%d-g%d-i%d", &p, &g, &i); err != nil || content != entryPayload(p, g, i) {
			t.Fatalf("line %d is torn: %.80q", n+1, l)
		}
		if seen[content] {
			t.Fatalf("line %d is a duplicate", n+1)
		}
		seen[content] = true
	}
}

func TestLockFileSymlinkIsRefused(t *testing.T) {
	s, dir := newStore(t)
	outside := filepath.Join(t.TempDir(), "created-outside")
	os.MkdirAll(filepath.Join(dir, Dir), 0o755)
	if err := os.Symlink(outside, filepath.Join(dir, Dir, LockFile)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Write(context.Background(), "web", "x")
	if err == nil || !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
	if _, err := os.Lstat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was created outside the workspace: %v", err)
	}
}

func TestMemoryLinkedOutsideIsRefused(t *testing.T) {
	for _, link := range []string{Dir, Path} {
		t.Run(link, func(t *testing.T) {
			s, dir := newStore(t)
			outside := t.TempDir()
			os.WriteFile(filepath.Join(outside, File), []byte("2026-01-01|web|secret\n"), 0o644)
			target := outside
			if link == Path {
				os.MkdirAll(filepath.Join(dir, Dir), 0o755)
				target = filepath.Join(outside, File)
			}
			if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Search(context.Background(), []string{"secret"}, false, 5); err == nil {
				t.Error("search read a memory file outside the workspace")
			}
			if _, err := s.Write(context.Background(), "web", "leak"); err == nil {
				t.Error("write went through a link outside the workspace")
			}
			if b, _ := os.ReadFile(filepath.Join(outside, File)); string(b) != "2026-01-01|web|secret\n" {
				t.Errorf("outside file changed: %q", b)
			}
		})
	}
}

func TestTooLarge(t *testing.T) {
	s, dir := newStore(t)
	s.opts.MaxBytes = 100
	writeFile(t, dir, strings.Repeat("2026-01-01|web|0123456789\n", 10))
	var tl *TooLargeError
	if _, err := s.Search(context.Background(), []string{"x"}, false, 5); !errors.As(err, &tl) {
		t.Fatalf("search: %v", err)
	}
	// Writing still works: the entry is kept, only not counted.
	w, err := s.Write(context.Background(), "web", "still saved")
	if err != nil || w.Line != 0 {
		t.Fatalf("write: %+v %v", w, err)
	}
	if !strings.HasSuffix(readFile(t, dir), "|web|still saved\n") {
		t.Error("entry not appended")
	}
}

func TestCanceledWriterWaitsNoLonger(t *testing.T) {
	s, _ := newStore(t)
	s.opts.LockWait = time.Hour
	if err := s.root.MkdirAll(Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := New(s.root, Options{}).lock(context.Background(), s.root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(ctx, "web", "x")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	s.opts.LockWait = time.Millisecond
	if _, err := s.Write(context.Background(), "web", "x"); !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
}

func TestIndexSeesEditsAtTheStart(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	body := strings.Repeat("2026-01-01|web|filler line for the middle\n", 400) // > 2 verify windows
	writeFile(t, dir, "2026-01-01|web|alpha\n"+body)
	if res, _ := s.Search(ctx, []string{"alpha"}, false, 5); res.Total != 1 {
		t.Fatalf("alpha: %d", res.Total)
	}
	// Rewritten in place (same inode), grown, changed only at the start.
	f, err := os.OpenFile(filepath.Join(dir, Path), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("2026-01-01|web|omega omega\n" + body + "2026-01-02|web|new\n")
	f.Close()
	res, _ := s.Search(ctx, []string{"alpha"}, false, 5)
	res2, _ := s.Search(ctx, []string{"omega"}, false, 5)
	if res.Total != 0 || res2.Total != 1 {
		t.Fatalf("after editing the first line: alpha %d omega %d, want 0 and 1", res.Total, res2.Total)
	}
}

func TestIndexWindowed(t *testing.T) {
	text := []byte(strings.Repeat("the tea party at the theatre; ", 20) + "needle at the end")
	for _, k := range []string{"tea", "needle", "end", "t", "the tea", "zzz", "party at the theatre; the tea"} {
		for start := 0; start < 70; start += 7 {
			if got, want := indexWindowed(text[start:], []byte(k)), bytes.Index(text[start:], []byte(k)); got != want {
				t.Errorf("indexWindowed(text[%d:], %q) = %d, want %d", start, k, got, want)
			}
		}
	}
}
