package workspace

import (
	"os"
	"strconv"
)

// openedPath returns the path of the open file f as the kernel sees it,
// every symbolic link resolved.
func openedPath(f *os.File) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
}
