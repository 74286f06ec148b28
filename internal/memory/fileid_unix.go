//go:build unix

package memory

import (
	"io/fs"
	"syscall"
)

// fileID returns the device and inode of fi, which tell a replaced file
// from a grown one.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		dev, ino = uint64(st.Dev), st.Ino
	}
	return dev, ino
}
