//go:build unix

package tools

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// makeEmptyFiles creates n empty files in dir, named by number.
func makeEmptyFiles(b *testing.B, dir string, n int) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(dfd)
	name := make([]byte, 0, 16)
	for i := range n {
		name = strconv.AppendInt(append(name[:0], 'f'), int64(i), 10)
		fd, err := unix.Openat(dfd, string(name), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}
