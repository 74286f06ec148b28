//go:build !unix

package audit

import (
	"os"
	"path/filepath"
)

// fileReader reads record files for Verify.
type fileReader struct{ root string }

func newFileReader(root string, _ []string) (*fileReader, error) { return &fileReader{root: root}, nil }

func (r *fileReader) read(file string, _ *[]byte) ([]byte, error) {
	return os.ReadFile(filepath.Join(r.root, filepath.FromSlash(file)))
}

func (r *fileReader) close() {}
