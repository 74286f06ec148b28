package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitAhead waits until an unnamed file is made ahead, and reports
// whether one was.
func waitAhead(f *files, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		f.mu.Lock()
		ready := f.ahead >= 0
		f.mu.Unlock()
		if ready {
			return true
		}
	}
	return false
}

// TestFileMadeAhead: after a record, the next record's file is made
// ahead and used; records close together make none (tested by
// TestBackToBackRecordsMakeNoneAhead); when its day folder is deleted (retention, an
// operator) or made again meanwhile, the next record still lands whole,
// in the folder as it is now.
func TestFileMadeAhead(t *testing.T) {
	l := newLog(t, Options{})
	day := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	write := func(id string) {
		t.Helper()
		time.Sleep(2 * aheadGap) // as calls that do some work between records
		rec := Record{CallID: id, ToolName: "read_file", Timestamp: day}
		st, err := l.Start(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.Status, rec.Result = "success", "content of "+id
		if err := l.Finish(st, rec); err != nil {
			t.Fatal(err)
		}
		if got := readRecord(t, l.Dir(), rec); got.Result != "content of "+id {
			t.Errorf("record %s: %+v", id, got)
		}
	}
	write("first")
	if !waitAhead(l.files, 5*time.Second) {
		t.Fatal("no file was made ahead after a record")
	}
	l.files.mu.Lock()
	var made unix.Stat_t
	err := unix.Fstat(l.files.ahead, &made)
	l.files.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	write("second")
	var got unix.Stat_t
	if err := unix.Stat(filepath.Join(l.Dir(), FileName(Record{CallID: "second", Timestamp: day})), &got); err != nil {
		t.Fatal(err)
	}
	if got.Ino != made.Ino || got.Dev != made.Dev {
		t.Error("the next record is not the file made ahead")
	}

	for _, c := range []struct {
		id     string
		change func(dir string)
	}{
		{"after-delete", func(dir string) { os.RemoveAll(dir) }},
		{"after-remake", func(dir string) { os.RemoveAll(dir); os.Mkdir(dir, 0o750) }},
	} {
		if !waitAhead(l.files, 5*time.Second) {
			t.Fatal("no file was made ahead")
		}
		c.change(filepath.Join(l.Dir(), "2026-12-02"))
		write(c.id)
	}
}

// TestBackToBackRecordsMakeNoneAhead: records that follow one another at
// once leave the maker asleep: it could not get ahead of them.
func TestBackToBackRecordsMakeNoneAhead(t *testing.T) {
	l := newLog(t, Options{})
	for i := range 20 {
		// As if the last record had just been placed, however slowly
		// this machine runs the loop.
		l.files.last.Store(time.Now().Add(time.Hour).UnixNano())
		rec := Record{CallID: fmt.Sprint(i), ToolName: "read_file", Timestamp: time.Now()}
		st, err := l.Start(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.Status = "success"
		if err := l.Finish(st, rec); err != nil {
			t.Fatal(err)
		}
	}
	if waitAhead(l.files, 50*time.Millisecond) {
		t.Error("a file was made ahead for records back to back")
	}
}
