//go:build unix

package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// A head file cut short under its mapping (as a file system that cannot
// back the page would leave it) makes the write an error, not a SIGBUS
// that ends the process; and the writes before it are in the file.
func TestHeadWriterFaultIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "head")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := newHeadWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	want := headState{Seq: 7, Hash: [32]byte{1}, Prev: [32]byte{2}, File: "2026-12-07/a.json"}
	if err := w.write(want); err != nil {
		t.Fatal(err)
	}
	if got, ok := readHeadFile(path); !ok || got != want {
		t.Fatalf("head file holds %+v (whole: %v), want %+v", got, ok, want)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if err := w.write(headState{Seq: 8}); err == nil {
		t.Fatal("a write past the end of the mapped file succeeded")
	}
}

// A head file written before keeps its slots when a new process maps it.
func TestHeadWriterKeepsTheHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "head")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newHeadWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	want := headState{Seq: 41, Hash: [32]byte{9}, File: "d/x.json"}
	if err := w.write(want); err != nil {
		t.Fatal(err)
	}
	w.close()
	f.Close()
	f, err = os.OpenFile(path, os.O_RDWR, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err = newHeadWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if got, ok := readHeadFile(path); !ok || got != want {
		t.Fatalf("after mapping again the head is %+v (whole: %v), want %+v", got, ok, want)
	}
}
