package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// memoryFile returns the memory file's content.
func (s *testServer) memoryFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Workspace, "memory", "MEMORY.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeMemory writes entries through the tool and fails on any error.
func (s *testServer) writeMemory(t *testing.T, contents ...string) {
	t.Helper()
	for _, c := range contents {
		mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": c}))
	}
}

func today() string { return time.Now().Format("2006-01-02") }

func TestMemoryWrite(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	d := today()

	out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "User prefers green tea"}))
	want := "Saved to memory/MEMORY.md as entry 1 (line 1); the memory now holds 1 entry:\n" + d + "|web|User prefers green tea"
	if out != want {
		t.Errorf("write result:\n%s\nwant:\n%s", out, want)
	}
	t.Run("source from X-Source", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "from feishu"}, "X-Source", "feishu"))
		if !strings.Contains(out, "entry 2 (line 2); the memory now holds 2 entries") || !strings.HasSuffix(out, d+"|feishu|from feishu") {
			t.Errorf("result: %s", out)
		}
	})
	t.Run("separator in X-Source", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "x"}, "X-Source", "tele|gram"))
		if !strings.HasSuffix(out, d+"|tele/gram|x") {
			t.Errorf("result: %s", out)
		}
	})
	t.Run("content folded to one line", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "  line one\nline two\r\nline three\r "}))
		if !strings.HasSuffix(out, d+"|web|line one line two  line three") {
			t.Errorf("result: %s", out)
		}
	})
	t.Run("unicode", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "用户的生日是三月五日"}, "X-Source", "qq"))
		if !strings.HasSuffix(out, d+"|qq|用户的生日是三月五日") {
			t.Errorf("result: %s", out)
		}
	})
	wantFile := d + "|web|User prefers green tea\n" + d + "|feishu|from feishu\n" + d + "|tele/gram|x\n" +
		d + "|web|line one line two  line three\n" + d + "|qq|用户的生日是三月五日\n"
	if got := s.memoryFile(t); got != wantFile {
		t.Errorf("MEMORY.md:\n%q\nwant:\n%q", got, wantFile)
	}

	for _, c := range []struct {
		name string
		args any
		code string
		msg  string
	}{
		{"no content", map[string]any{"action": "write"}, toolerr.InvalidArguments, "needs content"},
		{"empty content", map[string]any{"action": "write", "content": ""}, toolerr.InvalidArguments, "content"},
		{"blank content", map[string]any{"action": "write", "content": " \n\t\r "}, toolerr.InvalidArguments, "content must not be blank (action=write needs content)"},
		{"too long", map[string]any{"action": "write", "content": strings.Repeat("長", 4001)}, toolerr.InvalidArguments, "content"},
		{"unknown action", map[string]any{"action": "delete"}, toolerr.InvalidArguments, "action"},
		{"no action", map[string]any{"content": "x"}, toolerr.InvalidArguments, "action"},
		{"unknown parameter", map[string]any{"action": "write", "content": "x", "date": "2020-01-01"}, toolerr.InvalidArguments, "date"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustFail(t, s.invoke(t, "memory", c.args), c.code, c.msg)
		})
	}
	t.Run("4000 characters fit", func(t *testing.T) {
		mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": strings.Repeat("長", 4000)}))
	})
}

func TestMemorySearch(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	res := s.invoke(t, "memory", map[string]any{"action": "search", "keywords": "tea"})
	if out := mustSucceed(t, res); !strings.Contains(out, "Memory is empty") {
		t.Errorf("empty memory: %s", out)
	}
	s.writeWS(t, "memory/MEMORY.md", strings.Join([]string{
		"2026-01-01|web|User likes green TEA",              // 1
		"2026-01-02|feishu|用户喜欢喝绿茶",                        // 2
		"2026-01-03|web|Project Apollo deadline is Friday", // 3
		"2026-01-04|web|tea with the Apollo team",          // 4
		"2026-01-05|qq|用户的项目叫阿波罗，部署在周五",                    // 5
	}, "\n")+"\n")
	for i := 6; i <= 25; i++ {
		s.writeMemory(t, fmt.Sprintf("note %d about the budget", i))
	}
	d := today()
	cases := []struct {
		name  string
		args  map[string]any
		lines []string // expected hit lines, in order
		wants []string
	}{
		{"or is the default, newest first", map[string]any{"keywords": "tea friday"},
			[]string{"[4] 2026-01-04|web|tea with the Apollo team", "[3] 2026-01-03|web|Project Apollo deadline is Friday", "[1] 2026-01-01|web|User likes green TEA"},
			[]string{"Found 3 entries matching any of 'tea friday'", "newest first"}},
		{"and", map[string]any{"keywords": "TEA apollo", "match_mode": "and"},
			[]string{"[4] 2026-01-04|web|tea with the Apollo team"}, []string{"Found 1 entry matching all of 'TEA apollo'"}},
		{"explicit or", map[string]any{"keywords": "绿茶 阿波罗", "match_mode": "or"},
			[]string{"[5] 2026-01-05|qq|用户的项目叫阿波罗，部署在周五", "[2] 2026-01-02|feishu|用户喜欢喝绿茶"}, nil},
		{"chinese substring and", map[string]any{"keywords": "用户 部署", "match_mode": "and"},
			[]string{"[5] 2026-01-05|qq|用户的项目叫阿波罗，部署在周五"}, nil},
		{"source is searchable", map[string]any{"keywords": "feishu"}, []string{"[2] 2026-01-02|feishu|用户喜欢喝绿茶"}, nil},
		{"default max_results is 15", map[string]any{"keywords": "budget"}, nil,
			[]string{"Found 20 entries matching any of 'budget'", "showing the 15 newest", "[25] " + d + "|web|note 25 about the budget", "[11] " + d, "Only the 15 newest of 20 matches are shown. Next:"}},
		{"max_results cuts newest first", map[string]any{"keywords": "budget", "max_results": 2},
			[]string{"[25] " + d + "|web|note 25 about the budget", "[24] " + d + "|web|note 24 about the budget"},
			[]string{"showing the 2 newest", "Only the 2 newest of 20 matches are shown"}},
		{"no match", map[string]any{"keywords": "zebra"}, nil, []string{"No entries match any of 'zebra' in memory/MEMORY.md (25 entries). Next:"}},
		{"extra spaces", map[string]any{"keywords": "  apollo   "}, []string{"[4] 2026-01-04|web|tea with the Apollo team", "[3] 2026-01-03|web|Project Apollo deadline is Friday"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.args["action"] = "search"
			out := mustSucceed(t, s.invoke(t, "memory", c.args))
			var got []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "[") && !strings.HasPrefix(l, "[Only") {
					got = append(got, l)
				}
			}
			if c.lines != nil && strings.Join(got, "\n") != strings.Join(c.lines, "\n") {
				t.Errorf("hits:\n%s\nwant:\n%s\nresult:\n%s", strings.Join(got, "\n"), strings.Join(c.lines, "\n"), out)
			}
			if c.name == "default max_results is 15" && len(got) != 15 {
				t.Errorf("%d hits, want 15", len(got))
			}
			assertContains(t, "result", out, c.wants...)
		})
	}
	for _, c := range []struct {
		name string
		args map[string]any
		msg  string
	}{
		{"no keywords", map[string]any{"action": "search"}, "needs keywords"},
		{"blank keywords", map[string]any{"action": "search", "keywords": "   "}, "needs keywords"},
		{"bad match_mode", map[string]any{"action": "search", "keywords": "x", "match_mode": "xor"}, "match_mode"},
		{"max_results too large", map[string]any{"action": "search", "keywords": "x", "max_results": 101}, "max_results"},
		{"max_results zero", map[string]any{"action": "search", "keywords": "x", "max_results": 0}, "max_results"},
		{"too many keywords", map[string]any{"action": "search", "keywords": strings.Repeat("k ", 21)}, "at most 20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustFail(t, s.invoke(t, "memory", c.args), toolerr.InvalidArguments, c.msg)
		})
	}
}

func TestMemoryRead(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "read"}))
	if !strings.Contains(out, "Memory is empty") {
		t.Errorf("empty: %s", out)
	}
	var lines []string
	for i := 1; i <= 250; i++ {
		lines = append(lines, fmt.Sprintf("2026-%02d-%02d|web|entry %d", 1+(i-1)/28%12, 1+(i-1)%28, i))
	}
	s.writeWS(t, "memory/MEMORY.md", strings.Join(lines, "\n")+"\n")
	header := "memory/MEMORY.md: 250 entries in 250 lines, dated 2026-01-01 to 2026-09-26."
	cases := []struct {
		name  string
		args  map[string]any
		first string // first shown line
		last  string
		count int
		wants []string
	}{
		{"recent_count default 10, oldest first", map[string]any{}, "[241] ", "[250] ", 10,
			[]string{header, "The 10 newest entries, oldest first:", "[Not shown: 240 older entries. Next:"}},
		{"recent_count", map[string]any{"recent_count": 3}, "[248] ", "[250] 2026-09-26|web|entry 250", 3, []string{"The 3 newest entries"}},
		{"range", map[string]any{"start_line": 10, "end_line": 12}, "[10] 2026-01-10|web|entry 10", "[12] ", 3,
			[]string{header, "Lines 10-12:", "[More lines follow (13-250). Next: continue with start_line=13.]"}},
		{"range wins over recent_count", map[string]any{"start_line": 1, "end_line": 2, "recent_count": 50}, "[1] ", "[2] ", 2, nil},
		{"start_line alone reads 50", map[string]any{"start_line": 240}, "[240] ", "[250] ", 11, []string{"Lines 240-250:"}},
		{"end_line alone reads the 50 before", map[string]any{"end_line": 60}, "[11] ", "[60] ", 50, []string{"Lines 11-60:"}},
		{"end_line past the end is clipped", map[string]any{"start_line": 249, "end_line": 400}, "[249] ", "[250] ", 2, []string{"Lines 249-250:"}},
		{"at most 200 lines", map[string]any{"start_line": 1, "end_line": 250}, "[1] ", "[200] ", 200, []string{"continue with start_line=201"}},
		{"one line", map[string]any{"start_line": 7, "end_line": 7}, "[7] 2026-01-07|web|entry 7", "[7] ", 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.args["action"] = "read"
			out := mustSucceed(t, s.invoke(t, "memory", c.args))
			var shown []string
			for _, l := range strings.Split(out, "\n") {
				if len(l) > 1 && l[0] == '[' && l[1] >= '0' && l[1] <= '9' {
					shown = append(shown, l)
				}
			}
			if len(shown) != c.count || !strings.HasPrefix(shown[0], c.first) || !strings.HasPrefix(shown[len(shown)-1], c.last) {
				t.Errorf("shown %d lines from %.40q to %.40q, want %d from %q to %q\n%s", len(shown), shown[0], shown[len(shown)-1], c.count, c.first, c.last, out)
			}
			assertContains(t, "result", out, c.wants...)
		})
	}
	for _, c := range []struct {
		name string
		args map[string]any
		msg  string
	}{
		{"start after end", map[string]any{"start_line": 5, "end_line": 4}, "start_line must be <= end_line, but 5 > 4"},
		{"beyond the end", map[string]any{"start_line": 251}, "start_line 251 is beyond the end of memory/MEMORY.md, which has 250 lines"},
		{"zero start", map[string]any{"start_line": 0}, "start_line"},
		{"recent_count too large", map[string]any{"recent_count": 101}, "recent_count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.args["action"] = "read"
			mustFail(t, s.invoke(t, "memory", c.args), toolerr.InvalidArguments, c.msg)
		})
	}
}

// TestMemoryHandEditedFile: a file edited by hand, with lines in other
// forms, blank lines, CRLF and no final line break, still loads; its odd
// lines are reported, searched and kept as written. The last line, without
// a line break, could as well be a write cut short: it is reported and
// ignored until a write terminates it.
func TestMemoryHandEditedFile(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	content := "2026-01-01|web|first entry\r\n" + // 1
		"\n" + // 2
		"# My memories (written by hand)\n" + // 3
		"2026-01-02 web no separators\n" + // 4
		"2026-02-30|web|impossible date\n" + // 5
		"2026-01-03|web|last entry" // no final newline
	s.writeWS(t, "memory/MEMORY.md", content)

	out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "read"}))
	for _, w := range []string{
		"memory/MEMORY.md: 4 entries in 5 lines, dated 2026-01-01 to 2026-01-01.",
		"[1] 2026-01-01|web|first entry\n[3] # My memories (written by hand)\n[4] 2026-01-02 web no separators\n[5] 2026-02-30|web|impossible date\n",
		"Note: the file ends with 25 bytes without a line break",
		"Note: 3 lines are not in the form YYYY-MM-DD|source|content (kept as written): lines 3, 4, 5.",
		"Note: 1 blank line: line 2.",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("read lacks %q:\n%s", w, out)
		}
	}
	out = mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "read", "start_line": 1, "end_line": 3}))
	if !strings.Contains(out, "[1] 2026-01-01|web|first entry\n[2] \n[3] # My memories") {
		t.Errorf("range:\n%s", out)
	}
	out = mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "search", "keywords": "separators hand"}))
	if !strings.Contains(out, "[4] 2026-01-02 web no separators\n[3] # My memories (written by hand)") {
		t.Errorf("search:\n%s", out)
	}
	if got := s.memoryFile(t); got != content {
		t.Errorf("reading changed the file: %q", got)
	}
	// A write puts the new entry on its own line after the unterminated one.
	out = mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "new"}))
	if !strings.Contains(out, "entry 6 (line 7); the memory now holds 6 entries") {
		t.Errorf("write: %s", out)
	}
	if got := s.memoryFile(t); got != content+"\n"+today()+"|web|new\n" {
		t.Errorf("after write: %q", got)
	}
}

func TestMemoryConcurrentCalls(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	const clients, writes = 8, 25
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < writes; i++ {
				res := s.invoke(t, "memory", map[string]any{"action": "write", "content": fmt.Sprintf("client %d write %d %s", c, i, strings.Repeat("x", 500))})
				if res.Status != registry.StatusSuccess {
					t.Errorf("write: %s", res.Result)
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(s.memoryFile(t), "\n"), "\n")
	if len(lines) != clients*writes {
		t.Fatalf("%d lines, want %d", len(lines), clients*writes)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var c, i int
		if _, err := fmt.Sscanf(l[len(today())+5:], "client %d write %d", &c, &i); err != nil || l != fmt.Sprintf("%s|web|client %d write %d %s", today(), c, i, strings.Repeat("x", 500)) || seen[l] {
			t.Fatalf("torn or duplicate line: %.80q", l)
		}
		seen[l] = true
	}
	out := mustSucceed(t, s.invoke(t, "memory", map[string]any{"action": "read", "recent_count": 1}))
	if !strings.Contains(out, fmt.Sprintf("%d entries in %d lines", clients*writes, clients*writes)) {
		t.Errorf("read: %s", out)
	}
}

func TestMemoryConfinement(t *testing.T) {
	t.Parallel()
	t.Run("memory folder linked outside", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, nil)
		outside := t.TempDir()
		os.WriteFile(filepath.Join(outside, "MEMORY.md"), []byte("2026-01-01|web|host secret\n"), 0o644)
		if err := os.Symlink(outside, filepath.Join(s.Workspace, "memory")); err != nil {
			t.Fatal(err)
		}
		mustFail(t, s.invoke(t, "memory", map[string]any{"action": "search", "keywords": "secret"}), toolerr.PathDenied, "outside the workspace")
		mustFail(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "x"}), toolerr.PathDenied)
		if b, _ := os.ReadFile(filepath.Join(outside, "MEMORY.md")); string(b) != "2026-01-01|web|host secret\n" {
			t.Errorf("outside file changed: %q", b)
		}
	})
	t.Run("lock file linked outside", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, nil)
		target := filepath.Join(t.TempDir(), "made-by-toolsvc")
		os.MkdirAll(filepath.Join(s.Workspace, "memory"), 0o755)
		os.Symlink(target, filepath.Join(s.Workspace, "memory", ".MEMORY.md.lock"))
		mustFail(t, s.invoke(t, "memory", map[string]any{"action": "write", "content": "x"}), toolerr.PathDenied, "memory/.MEMORY.md.lock is a symbolic link")
		if _, err := os.Lstat(target); !os.IsNotExist(err) {
			t.Errorf("a file was created outside the workspace")
		}
	})
	t.Run("memory file is a folder", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, nil)
		os.MkdirAll(filepath.Join(s.Workspace, "memory", "MEMORY.md"), 0o755)
		mustFail(t, s.invoke(t, "memory", map[string]any{"action": "read"}), toolerr.ToolError, "not a regular file")
	})
}

func TestMemoryDisabled(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"MEMORY_ENABLED": "false"})
	resp, _ := s.do(t, "GET", "/tools/memory", nil, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /tools/memory with MEMORY_ENABLED=false: %d", resp.StatusCode)
	}
	s.Stop(t)
	s = startServer(t, nil)
	resp, body := s.do(t, "GET", "/tools/memory", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"match_mode"`) {
		t.Errorf("GET /tools/memory by default: %d %s", resp.StatusCode, body)
	}
}
