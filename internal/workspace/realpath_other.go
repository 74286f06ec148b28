//go:build !linux

package workspace

import (
	"os"
	"path/filepath"
)

// openedPath returns the path of the open file f with every symbolic link
// resolved. Without /proc the name it was opened by is resolved again, so
// a link changed in between is seen as it is now; RealPath checks the
// result against the workspace either way.
func openedPath(f *os.File) (string, error) {
	return filepath.EvalSymlinks(f.Name())
}
