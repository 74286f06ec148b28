//go:build !linux

package audit

import (
	"os"
	"path/filepath"
)

// files places records in the day folders: each is written under a
// temporary name and renamed, so it appears whole. (Linux links an
// unnamed file in place instead.)
type files struct{ root string }

func newFiles(root string) *files { return &files{root: root} }

// place makes rel (DAY/NAME) appear with data. With ifAbsent, an existing
// file of that name is kept and place succeeds.
func (f *files) place(rel string, data []byte, ifAbsent bool) error {
	dir := filepath.Join(f.root, filepath.Dir(rel))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && ifAbsent && f.exists(rel) {
		return os.Remove(tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(f.root, rel))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func (f *files) forget(string) {}
func (f *files) close()        {}

// reserve has nothing to make ahead here: records are written under
// temporary names.
func (f *files) reserve(string) int { return -1 }
func (f *files) unreserve(int)      {}

// placeIn is place of the file name in the day folder.
func (f *files) placeIn(day, name string, data []byte, ifAbsent bool, _ int) error {
	return f.place(filepath.Join(day, name), data, ifAbsent)
}
