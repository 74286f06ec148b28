package audit

import (
	"os"
	"path/filepath"
)

// The parts of files that are the same on every system; how a record is
// placed differs (files_linux.go, files_other.go).

// exists reports whether rel is in the audit folder.
func (f *files) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(f.root, rel))
	return err == nil
}
