package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"READ_MAX_CHARS": "200"})
	var lines []string
	for i := 1; i <= 50; i++ {
		lines = append(lines, fmt.Sprintf("line %02d", i))
	}
	s.writeWS(t, "src/fifty.txt", strings.Join(lines, "\n")+"\n")
	s.writeWS(t, "small.txt", "alpha\nbeta\r\ngamma")
	s.writeWS(t, "empty.txt", "")
	s.writeWS(t, "long-line.txt", strings.Repeat("x", 500)+"\nshort\n")
	s.writeWS(t, "bin.dat", "ELF\x00\x01\x02")
	s.writeWS(t, "gbk.txt", "\xc4\xe3\xba\xc3\n") // 你好 in GBK
	s.writeWS(t, "中文.md", "你好，世界\n")
	if err := mkfifo(filepath.Join(s.Workspace, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}

	ok := []struct {
		name  string
		args  string
		wants []string
		not   []string
	}{
		{"whole small file", `{"path":"small.txt"}`, []string{"[File: small.txt | Lines: 3 | Showing: 1-3]", "1| alpha", "2| beta", "3| gamma"}, []string{"\r", "More lines"}},
		{"range", `{"path":"src/fifty.txt","start_line":10,"end_line":12}`, []string{"[File: src/fifty.txt | Lines: 50 | Showing: 10-12]", "10| line 10", "12| line 12", "continue with start_line=13"}, []string{"line 09", "line 13"}},
		{"end clamped to the file", `{"path":"small.txt","start_line":2,"end_line":99}`, []string{"Showing: 2-3", "gamma"}, []string{"More lines"}},
		{"without numbers", `{"path":"small.txt","show_line_numbers":false}`, []string{"\nalpha\nbeta\ngamma"}, []string{"1| "}},
		{"absolute path inside", `{"path":"` + filepath.Join(s.Workspace, "small.txt") + `"}`, []string{"[File: small.txt"}, nil},
		{"output cap", `{"path":"src/fifty.txt"}`, []string{"Showing: 1-28]", "[Output cut at 200 characters. Next: continue with start_line=29.]"}, []string{"line 29"}},
		{"continue after cap", `{"path":"src/fifty.txt","start_line":29}`, []string{"Showing: 29-50]", "50| line 50"}, []string{"Next:"}},
		{"line longer than cap", `{"path":"long-line.txt"}`, []string{strings.Repeat("x", 200), "Line 1 is longer than the output cap", "start_line=2"}, []string{strings.Repeat("x", 201)}},
		{"empty file", `{"path":"empty.txt"}`, []string{"Lines: 0", "(empty file)"}, nil},
		{"unicode name and text", `{"path":"中文.md"}`, []string{"你好，世界"}, nil},
		{"several files", `{"paths":["small.txt","missing.txt","bin.dat","src/fifty.txt"],"end_line":2}`,
			[]string{"[File: small.txt", "alpha", "[File: missing.txt] Error: 'missing.txt' does not exist", "[File: bin.dat] Error:", "binary", "[File: src/fifty.txt", "line 02", "Read 2 of 4 files; 2 failed"}, nil},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			out := mustSucceed(t, s.invoke(t, "read_file", c.args))
			assertContains(t, "result", out, c.wants...)
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("has %q:\n%s", n, out)
				}
			}
		})
	}

	bad := []struct {
		name, args, code string
		wants            []string
	}{
		{"missing", `{"path":"nope.txt"}`, toolerr.NotFound, []string{"'nope.txt' does not exist", "Next:"}},
		{"folder", `{"path":"src"}`, toolerr.InvalidArguments, []string{"is a folder", "list_dir"}},
		{"binary", `{"path":"bin.dat"}`, toolerr.InvalidArguments, []string{"binary file"}},
		{"not utf-8", `{"path":"gbk.txt"}`, toolerr.InvalidArguments, []string{"not UTF-8", "iconv"}},
		{"start beyond end", `{"path":"small.txt","start_line":10}`, toolerr.InvalidArguments, []string{"start_line 10 is beyond the end", "has 3 lines"}},
		{"start after end", `{"path":"small.txt","start_line":3,"end_line":2}`, toolerr.InvalidArguments, []string{"start_line must be <= end_line, but 3 > 2"}},
		{"neither path nor paths", `{}`, toolerr.InvalidArguments, []string{"missing required path or paths (exactly one of them)"}},
		{"both path and paths", `{"path":"a","paths":["b"]}`, toolerr.InvalidArguments, []string{"path and paths must not both be given"}},
		{"named pipe does not hang", `{"path":"pipe"}`, toolerr.InvalidArguments, []string{"not a regular file"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			mustFail(t, s.invoke(t, "read_file", c.args), c.code, c.wants...)
		})
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	out := mustSucceed(t, s.invoke(t, "write_file", `{"path":"deep/er/new.txt","content":"héllo\n"}`))
	if out != "Wrote 6 chars to deep/er/new.txt" {
		t.Errorf("result %q", out)
	}
	assertFile(t, filepath.Join(s.Workspace, "deep/er/new.txt"), "héllo\n")

	mustSucceed(t, s.invoke(t, "write_file", `{"path":"deep/er/new.txt","content":"replaced","mode":"overwrite"}`))
	assertFile(t, filepath.Join(s.Workspace, "deep/er/new.txt"), "replaced")

	out = mustSucceed(t, s.invoke(t, "write_file", `{"path":"deep/er/new.txt","content":" and more","mode":"append"}`))
	if !strings.Contains(out, "Appended 9 chars") || !strings.Contains(out, "17 bytes") {
		t.Errorf("append result %q", out)
	}
	assertFile(t, filepath.Join(s.Workspace, "deep/er/new.txt"), "replaced and more")

	mustSucceed(t, s.invoke(t, "write_file", `{"path":"fresh.log","content":"first","mode":"append"}`))
	assertFile(t, filepath.Join(s.Workspace, "fresh.log"), "first")

	// The permission bits of an existing file survive the atomic replace.
	script := s.writeWS(t, "run.sh", "#!/bin/sh\n")
	os.Chmod(script, 0o750)
	mustSucceed(t, s.invoke(t, "write_file", `{"path":"run.sh","content":"#!/bin/sh\necho hi\n"}`))
	if fi, _ := os.Stat(script); fi.Mode().Perm() != 0o750 {
		t.Errorf("mode after write: %v", fi.Mode())
	}
	// A symlink inside the workspace is written through, not replaced.
	s.writeWS(t, "real.txt", "old")
	os.Symlink("real.txt", filepath.Join(s.Workspace, "alias.txt"))
	mustSucceed(t, s.invoke(t, "write_file", `{"path":"alias.txt","content":"new"}`))
	assertFile(t, filepath.Join(s.Workspace, "real.txt"), "new")
	if fi, _ := os.Lstat(filepath.Join(s.Workspace, "alias.txt")); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the in-workspace symlink was replaced by a file")
	}

	mustFail(t, s.invoke(t, "write_file", `{"path":"deep","content":"x"}`), toolerr.InvalidArguments, "is a folder")
	mustFail(t, s.invoke(t, "write_file", `{"path":".","content":"x"}`), toolerr.InvalidArguments, "must name a file")
	mustFail(t, s.invoke(t, "write_file", `{"path":"real.txt/child","content":"x"}`), toolerr.InvalidArguments, "is a file, not a folder")
	// No temporary files are left behind.
	filepath.Walk(s.Workspace, func(p string, fi os.FileInfo, err error) error {
		if strings.Contains(p, ".tmp-") {
			t.Errorf("left over: %s", p)
		}
		return nil
	})
}

func TestEditFile(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	p := s.writeWS(t, "main.py", "def f():\n    return 1\n\ndef g():\n    return 1\n")
	out := mustSucceed(t, s.invoke(t, "edit_file", `{"path":"main.py","old_str":"def f():\n    return 1","new_str":"def f():\n    return 2"}`))
	if out != "Edited main.py: replaced 1 occurrence at line 1" {
		t.Errorf("result %q", out)
	}
	assertFile(t, p, "def f():\n    return 2\n\ndef g():\n    return 1\n")

	mustFail(t, s.invoke(t, "edit_file", `{"path":"main.py","old_str":"return","new_str":"yield"}`),
		toolerr.InvalidArguments, "occurs 2 times", "lines 2, 5", "more surrounding lines", "replace_all=true")
	assertFile(t, p, "def f():\n    return 2\n\ndef g():\n    return 1\n")

	out = mustSucceed(t, s.invoke(t, "edit_file", `{"path":"main.py","old_str":"return","new_str":"yield","replace_all":true}`))
	if !strings.Contains(out, "replaced 2 occurrences") {
		t.Errorf("result %q", out)
	}
	mustFail(t, s.invoke(t, "edit_file", `{"path":"main.py","old_str":"def  g():","new_str":"x"}`),
		toolerr.NotFound, "not found in 'main.py'", "apart from whitespace starts at line 4", "read_file")
	mustFail(t, s.invoke(t, "edit_file", `{"path":"main.py","old_str":"nothing like it","new_str":"x"}`), toolerr.NotFound, "read the file")
	mustFail(t, s.invoke(t, "edit_file", `{"path":"main.py","old_str":"a","new_str":"a"}`), toolerr.InvalidArguments, "change nothing")
	mustFail(t, s.invoke(t, "edit_file", `{"path":"nope.py","old_str":"a","new_str":"b"}`), toolerr.NotFound, "does not exist")
	s.writeWS(t, "bin", "\x00\x01")
	mustFail(t, s.invoke(t, "edit_file", `{"path":"bin","old_str":"a","new_str":"b"}`), toolerr.InvalidArguments, "not UTF-8")
}

func TestListDir(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"LIST_MAX_ENTRIES": "5"})
	s.writeWS(t, "b.txt", "12345")
	s.writeWS(t, "a/inner.go", "package a")
	s.writeWS(t, "a/deeper/x.md", "# x")
	os.Symlink("/etc", filepath.Join(s.Workspace, "link"))

	out := mustSucceed(t, s.invoke(t, "list_dir", `{}`))
	want := "Directory: .\n[DIR]  a/\n[FILE] b.txt (5 B)\n[LINK] link -> /etc"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	out = mustSucceed(t, s.invoke(t, "list_dir", `{"path":"a","recursive":true}`))
	want = "Directory: a (recursive)\n[DIR]  deeper/\n[FILE] deeper/x.md (3 B)\n[FILE] inner.go (9 B)"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	for i := 0; i < 12; i++ {
		s.writeWS(t, fmt.Sprintf("many/f%02d", i), "")
	}
	out = mustSucceed(t, s.invoke(t, "list_dir", `{"path":"many"}`))
	if !strings.Contains(out, "f04") || strings.Contains(out, "f05") || !strings.Contains(out, "... 7 more entries not shown") {
		t.Errorf("cap:\n%s", out)
	}
	os.MkdirAll(filepath.Join(s.Workspace, "void"), 0o755)
	if out := mustSucceed(t, s.invoke(t, "list_dir", `{"path":"void"}`)); !strings.Contains(out, "(empty folder)") {
		t.Errorf("empty: %s", out)
	}
	mustFail(t, s.invoke(t, "list_dir", `{"path":"missing"}`), toolerr.NotFound, "'missing' does not exist", "Next:")
	mustFail(t, s.invoke(t, "list_dir", `{"path":"b.txt"}`), toolerr.InvalidArguments, "is a file", "read_file")
	// The link out of the workspace is listed but not entered, even recursively.
	out = mustSucceed(t, s.invoke(t, "list_dir", `{"recursive":true}`))
	if strings.Contains(out, "passwd") || strings.Contains(out, "link/") {
		t.Errorf("followed a link out:\n%s", out)
	}
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}
