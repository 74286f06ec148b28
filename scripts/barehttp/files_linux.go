package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// fileWriter makes one file per call in a day folder: O_TMPFILE, write,
// linkat, as internal/audit does.
type fileWriter struct {
	dir int
}

func newFileWriter(root string) (*fileWriter, error) {
	day := filepath.Join(root, time.Now().UTC().Format("2006-01-02"))
	if err := os.MkdirAll(day, 0o750); err != nil {
		return nil, err
	}
	fd, err := unix.Open(day, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &fileWriter{dir: fd}, nil
}

func (w *fileWriter) write(t time.Time, data []byte) error {
	var rnd [16]byte
	rand.Read(rnd[:])
	name := t.UTC().Format("20060102T150405.000000000Z") + "_" + hex.EncodeToString(rnd[:]) + ".json"
	fd, err := unix.Openat(w.dir, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, data); err != nil {
		return err
	}
	if err := unix.Linkat(fd, "", w.dir, name, unix.AT_EMPTY_PATH); err == nil {
		return nil
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), w.dir, name, unix.AT_SYMLINK_FOLLOW)
}
