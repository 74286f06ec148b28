package tools

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/workspace"
)

var update = flag.Bool("update", false, "rewrite testdata/read_file.golden from what read_file returns")

// TestReadFileGolden pins read_file's text, byte for byte, over the shapes
// its output takes: line-number widths, ranges, CRLF, a missing last
// newline, empty files, lines and outputs cut at the cap, several files,
// and the refusals. Rewrite with -update after a deliberate change.
func TestReadFileGolden(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var many strings.Builder
	for i := 1; i <= 1200; i++ {
		fmt.Fprintf(&many, "line %d of many\n", i)
	}
	files := map[string]string{
		"small.txt":    strings.Repeat("hello\n", 10),
		"nonl.txt":     "one\ntwo\nthree",
		"crlf.txt":     "a\r\nb\r\n\r\nc\r\n",
		"empty.txt":    "",
		"blank.txt":    "\n",
		"many.txt":     many.String(),
		"long.txt":     strings.Repeat("x", 300) + "\nshort\n",
		"unicode.txt":  "héllo wörld\n界界界界界界界界界界\n😀 emoji\n",
		"binary.bin":   "abc\x00def\n",
		"latin1.txt":   "caf\xe9\n",
		"tabs.txt":     "\tindented\n  spaced  \n",
		"sub/deep.txt": "deep\n",
		"big.txt":      strings.Repeat("a line of a file larger than the counting limit\n", 5<<20/48),
	}
	for name, content := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "folder"), 0o755)
	calls := []struct {
		max  int
		args string
	}{
		{50000, `{"path":"small.txt"}`},
		{50000, `{"path":"small.txt","show_line_numbers":false}`},
		{50000, `{"path":"small.txt","start_line":3,"end_line":5}`},
		{50000, `{"path":"small.txt","start_line":10}`},
		{50000, `{"path":"small.txt","start_line":11}`},
		{50000, `{"path":"small.txt","end_line":99999}`},
		{50000, `{"path":"nonl.txt"}`},
		{50000, `{"path":"crlf.txt"}`},
		{50000, `{"path":"empty.txt"}`},
		{50000, `{"path":"blank.txt"}`},
		{50000, `{"path":"many.txt","start_line":990,"end_line":1010}`},
		{50000, `{"path":"many.txt","start_line":1195}`},
		{200, `{"path":"many.txt"}`},
		{200, `{"path":"many.txt","start_line":50}`},
		{100, `{"path":"long.txt"}`},
		{100, `{"path":"long.txt","start_line":2}`},
		{7, `{"path":"unicode.txt"}`},
		{50000, `{"path":"unicode.txt"}`},
		{50000, `{"path":"tabs.txt"}`},
		{50000, `{"path":"big.txt","start_line":2,"end_line":4}`},
		{60, `{"path":"big.txt","start_line":99}`},
		{50000, `{"path":"sub/deep.txt"}`},
		{50000, `{"path":"binary.bin"}`},
		{50000, `{"path":"latin1.txt"}`},
		{50000, `{"path":"folder"}`},
		{50000, `{"path":"missing.txt"}`},
		{50000, `{"paths":["small.txt","nonl.txt"]}`},
		{50000, `{"paths":["small.txt","missing.txt","empty.txt"],"start_line":2,"end_line":3}`},
		{120, `{"paths":["many.txt","small.txt","nonl.txt"]}`},
	}
	var out strings.Builder
	for _, c := range calls {
		tool := NewReadFile(ws, c.max, nil)
		res, err := tool.Execute(context.Background(), []byte(c.args))
		fmt.Fprintf(&out, "=== max %d %s\n%s\n", c.max, c.args, res)
		if err != nil {
			fmt.Fprintf(&out, "--- error: %v\n", err)
		}
	}
	golden := filepath.Join("testdata", "read_file.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("read_file's text differs from %s:\n%s", golden, out.String())
	}
}
