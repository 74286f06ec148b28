package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzFormatEntry: whatever a model sends as content and a channel as
// source, the entry is one line that parses back into the day written, the
// cleaned source and the folded content.
func FuzzFormatEntry(f *testing.F) {
	for _, s := range [][2]string{
		{"web", "likes tea"}, {"", "a|b|c"}, {"tele|gram", "line\nbreak\r\n"}, {"x\u2028y", "\u0085\u2029\x00\t"},
		{strings.Repeat("s", 100), "内容"}, {"\xff", "\xfe\xff"}, {" ", " "}, {"a b\tc", "2026-01-01|web|fake"},
	} {
		f.Add(s[0], s[1])
	}
	day := time.Date(2026, 12, 2, 23, 59, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, source, content string) {
		line := FormatEntry(day, source, content)
		if strings.ContainsAny(line, "\n\r\u0085\u2028\u2029\x00") {
			t.Fatalf("entry %q holds a line break or NUL", line)
		}
		date, src, ok := parseLine(line)
		if !ok || date != "2026-12-02" || src != CleanSource(source) {
			t.Fatalf("entry %q parsed as %q %q %v", line, date, src, ok)
		}
		if strings.Contains(src, "|") || src == "" || len([]rune(src)) > maxSourceLen {
			t.Fatalf("source %q: empty, too long or holding the separator", src)
		}
		if rest := line[len(date)+1+len(src)+1:]; rest != FoldContent(content) {
			t.Fatalf("content read back as %q, want %q", rest, FoldContent(content))
		}
	})
}

// FuzzStoreFile loads an arbitrary memory file, as a person may have
// edited it, first whole and then grown by an append while the index is
// loaded. The lines, statistics, search hits and recent entries the store
// reports must match a plain reading of the file; nothing may panic.
func FuzzStoreFile(f *testing.F) {
	for _, s := range [][3]string{
		{"2026-12-01|web|likes tea\n", "2026-12-02|web|TEA time\n", "tea"},
		{"", "no newline at the end", "end"},
		{"hand-written\r\n\r\n  \n", "2026-13-01|x|bad month\n|||\n", "x"},
		{"2026-12-01|web|partial", " line finished\n", "partial line"},
		{"\xff\xfe\n", "İstanbul ǅ ß\n", "i̇"},
		{"2026-12-01|a|b\n", "", ""},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), s[2])
	}
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, Dir), 0o755); err != nil {
		f.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { root.Close() })
	file := filepath.Join(dir, Path)

	f.Fuzz(func(t *testing.T, first, more []byte, keyword string) {
		if len(first)+len(more) > 64<<10 {
			return
		}
		if err := os.WriteFile(file, first, 0o644); err != nil {
			t.Fatal(err)
		}
		s := New(root, Options{})
		check(t, s, string(first), keyword)
		af, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = af.Write(more)
		af.Close()
		if err != nil {
			t.Fatal(err)
		}
		check(t, s, string(first)+string(more), keyword)
	})
}

// check compares what s reports with a plain reading of content.
func check(t *testing.T, s *Store, content, keyword string) {
	t.Helper()
	ctx := context.Background()
	// A last line without its newline may be a write cut short: the store
	// ignores it until it is finished.
	if i := strings.LastIndexByte(content, '\n'); i < len(content)-1 {
		content = content[:i+1]
	}
	var raw []string // as in the file; search sees a line's "\r" too
	if content != "" {
		raw = strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	}
	lines := make([]string, len(raw))
	for i := range raw {
		lines[i] = strings.TrimSuffix(raw[i], "\r")
	}
	got, st, err := s.Range(ctx, 1, len(lines)+5)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lines != len(lines) || len(got) != len(lines) {
		t.Fatalf("%q: %d lines reported (%d returned), want %d", content, st.Lines, len(got), len(lines))
	}
	var nonBlank, blank []int
	for i, l := range got {
		if l.N != i+1 || l.Text != lines[i] {
			t.Fatalf("%q: line %d = %d %q, want %q", content, i+1, l.N, l.Text, lines[i])
		}
		if strings.TrimSpace(lines[i]) == "" {
			blank = append(blank, i+1)
		} else {
			nonBlank = append(nonBlank, i+1)
		}
	}
	if st.Entries != len(nonBlank) || fmt.Sprint(st.Blank) != fmt.Sprint(blank) {
		t.Fatalf("%q: entries %d blank %v, want %d %v", content, st.Entries, st.Blank, len(nonBlank), blank)
	}

	recent, _, err := s.Recent(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := nonBlank[max(0, len(nonBlank)-3):]
	if len(recent) != len(want) {
		t.Fatalf("%q: %d recent lines, want %d", content, len(recent), len(want))
	}
	for i, l := range recent {
		if l.N != want[i] {
			t.Fatalf("%q: recent line %d is %d, want %d", content, i, l.N, want[i])
		}
	}

	// Keywords arrive as the memory tool splits them: at white space.
	kws := strings.Fields(keyword)
	for _, all := range []bool{false, true} {
		res, err := s.Search(ctx, kws, all, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var hits []int
		for i := len(lines) - 1; i >= 0 && len(kws) > 0; i-- {
			line, n := foldString(raw[i]), 0
			for _, k := range kws {
				if strings.Contains(line, foldString(k)) {
					n++
				}
			}
			if n > 0 && (!all || n == len(kws)) {
				hits = append(hits, i+1)
			}
		}
		var gotHits []int
		for _, h := range res.Hits {
			gotHits = append(gotHits, h.N)
		}
		if res.Total != len(hits) || !slices.Equal(gotHits, hits) {
			t.Fatalf("%q: search %q (all %v) found %v (total %d), want %v", content, kws, all, gotHits, res.Total, hits)
		}
	}
}
