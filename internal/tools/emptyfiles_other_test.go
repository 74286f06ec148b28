//go:build !unix

package tools

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// makeEmptyFiles creates n empty files in dir, named by number.
func makeEmptyFiles(b *testing.B, dir string, n int) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		f, err := os.Create(filepath.Join(dir, "f"+strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
