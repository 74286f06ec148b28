package tools

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// countingReader counts the reads that reach it.
type countingReader struct {
	r     io.Reader
	calls int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.calls++
	return c.r.Read(p)
}

// TestUpToSize: a file is read up to the size it had when opened, and the
// end costs no read of its own.
func TestUpToSize(t *testing.T) {
	for _, c := range []struct {
		name    string
		content string
		size    int64
		want    string
		reads   int // reads that reach the file, bufio's included
	}{
		{"small file, one read", "hello\nworld\n", 12, "hello\nworld\n", 1},
		{"grew after it was opened", "hello\nworld\nlater\n", 12, "hello\nworld\n", 1},
		{"shrank after it was opened", "hello\n", 12, "hello\n", 2},
		{"larger than the buffer", strings.Repeat("x", 200), 200, strings.Repeat("x", 200), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &countingReader{r: strings.NewReader(c.content)}
			r := bufio.NewReaderSize(upToSize(f, c.size), 64)
			got, err := io.ReadAll(r)
			if err != nil || string(got) != c.want {
				t.Fatalf("read %q, %v; want %q", got, err, c.want)
			}
			if f.calls != c.reads {
				t.Errorf("%d reads reached the file, want %d", f.calls, c.reads)
			}
		})
	}
}
