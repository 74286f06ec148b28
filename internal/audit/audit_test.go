package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newLog(t *testing.T, opts Options) *Log {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "audit_logs")
	}
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func readRecord(t *testing.T, l *Log, rec Record) Record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(l.Dir(), FileName(rec)))
	if err != nil {
		t.Fatal(err)
	}
	var got Record
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return got
}

func TestPendingThenFinal(t *testing.T) {
	l := newLog(t, Options{})
	start := time.Date(2026, 12, 2, 10, 30, 0, 123, time.FixedZone("CST", 8*3600))
	rec := Record{CallID: "c1", ToolName: "exec", Arguments: json.RawMessage(`{"command":"ls"}`), SessionID: "s", Timestamp: start, Status: "pending"}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	// A crash now leaves the pending record behind.
	if got := readRecord(t, l, rec); got.Status != "pending" || got.Timestamp.Location() != time.UTC {
		t.Errorf("pending record: %+v", got)
	}
	if !strings.HasPrefix(FileName(rec), "2026-12-02/20261202T023000.000000123Z_c1.json") {
		t.Errorf("file name %s", FileName(rec))
	}
	rec.Status, rec.Result, rec.DurationMS = "success", "total 0", 5
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	got := readRecord(t, l, rec)
	if got.Status != "success" || got.Result != "total 0" || got.DurationMS != 5 || got.ResultLength != 7 || got.ResultTruncated {
		t.Errorf("final record: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Join(l.Dir(), "2026-12-02"))
	if len(entries) != 1 {
		t.Errorf("want exactly one file, no temporaries: %v", entries)
	}
}

// TestFinalFreesNoInode checks that the final record swaps places with the
// pending one instead of deleting it: the pending file's inode lives on
// under .replaced/, so writing the log frees nothing per call.
func TestFinalFreesNoInode(t *testing.T) {
	l := newLog(t, Options{})
	rec := Record{CallID: "c3", ToolName: "read_file", Timestamp: time.Now(), Status: "pending"}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.Dir(), FileName(rec))
	pending, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	rec.Status = "success"
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	final, _ := os.Stat(path)
	if os.SameFile(pending, final) {
		t.Fatal("final record was written in place")
	}
	day, name := filepath.Split(FileName(rec))
	moved := filepath.Join(l.Dir(), l.sideFolder(filepath.Clean(day)), name)
	kept, err := os.Stat(moved)
	if err != nil || !os.SameFile(pending, kept) {
		t.Fatalf("pending file not kept under .replaced: %v", err)
	}
	if got := readRecord(t, l, rec); got.Status != "success" {
		t.Errorf("record at the call's name: %+v", got)
	}
	data, _ := os.ReadFile(moved)
	if !strings.Contains(string(data), `"status":"pending"`) {
		t.Errorf("replaced file: %s", data)
	}
}

// TestFinalWithoutPending: a final record whose pending record was never
// written (say the pending write failed) is moved into place.
func TestFinalWithoutPending(t *testing.T) {
	l := newLog(t, Options{})
	rec := Record{CallID: "c4", Timestamp: time.Now(), Status: "error", ErrorCode: "TIMEOUT"}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	if got := readRecord(t, l, rec); got.Status != "error" || got.ErrorCode != "TIMEOUT" {
		t.Errorf("record: %+v", got)
	}
	left, _ := os.ReadDir(filepath.Join(l.Dir(), l.sideFolder(rec.Timestamp.UTC().Format("2006-01-02"))))
	if len(left) != 0 {
		t.Errorf("left behind under .replaced: %v", left)
	}
}

// TestSpreadsSubfolders: on ext4 the audit folder and .replaced are marked
// as tops of hierarchies, so folders made in them get block groups of their
// own.
func TestSpreadsSubfolders(t *testing.T) {
	l := newLog(t, Options{})
	for _, dir := range []string{l.Dir(), filepath.Join(l.Dir(), ".replaced")} {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil || st.Type != unix.EXT4_SUPER_MAGIC {
			t.Skipf("not ext4 (%x): the flag means nothing here", st.Type)
		}
		flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
		if err != nil {
			t.Fatal(err)
		}
		if flags&0x00020000 == 0 {
			t.Errorf("%s: flags %#x lack FS_TOPDIR_FL", dir, flags)
		}
	}
}

// TestSideFolders: each log (each process) makes its files in side
// folders of its own, one per day, whose names differ at every start.
func TestSideFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit_logs")
	a, b := newLog(t, Options{Dir: dir}), newLog(t, Options{Dir: dir})
	now := time.Now()
	for i, l := range []*Log{a, b, a} {
		rec := Record{CallID: fmt.Sprint("s", i), Timestamp: now.AddDate(0, 0, i/2), Status: "pending"}
		if err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Status = "success"
		if err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	side, _ := os.ReadDir(filepath.Join(dir, ".replaced"))
	var names []string
	for _, e := range side {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	d0, d1 := now.UTC().Format("2006-01-02"), now.AddDate(0, 0, 1).UTC().Format("2006-01-02")
	want := []string{d0 + "." + a.tag, d0 + "." + b.tag, d1 + "." + a.tag}
	sort.Strings(want)
	if a.tag == b.tag || strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("side folders %v, want %v", names, want)
	}
	if !strings.HasPrefix(a.tag, fmt.Sprint(os.Getpid(), "-")) {
		t.Errorf("tag %q lacks the pid", a.tag)
	}
}

func TestNamesSortByTime(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var names []string
	for i := 0; i < 5; i++ {
		names = append(names, FileName(Record{CallID: fmt.Sprintf("z%d", 9-i), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}))
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("%s sorts after %s", names[i-1], names[i])
		}
	}
}

func TestCuts(t *testing.T) {
	l := newLog(t, Options{MaxResultChars: 10, MaxArgChars: 8})
	rec := Record{CallID: "c2", Timestamp: time.Now(), Status: "success",
		Result:    strings.Repeat("界", 25),
		Arguments: json.RawMessage(`{"path":"a","content":"0123456789abcdef","api_key":"abc","nested":{"Password":"hunter2"}}`)}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	got := readRecord(t, l, rec)
	if !got.ResultTruncated || got.Result != strings.Repeat("界", 10) || got.ResultLength != 25 {
		t.Errorf("result cut: %+v", got)
	}
	args, _ := json.Marshal(got.Arguments)
	for _, w := range []string{`"content":"01234567"`, `"api_key":"[REDACTED]"`, `"Password":"[REDACTED]"`, `"path":"a"`} {
		if !strings.Contains(string(args), w) {
			t.Errorf("arguments lack %s: %s", w, args)
		}
	}
	if strings.Contains(string(args), "hunter2") || !got.ArgumentsTruncated {
		t.Errorf("arguments: %s truncated=%v", args, got.ArgumentsTruncated)
	}
}

// TestNoTornReads has readers watch a record while it is rewritten: every
// read must parse as a whole record.
func TestNoTornReads(t *testing.T) {
	l := newLog(t, Options{MaxResultChars: 1 << 20})
	rec := Record{CallID: "torn", Timestamp: time.Now(), Status: "pending"}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.Dir(), FileName(rec))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rec.Result = strings.Repeat("x", 1000+i%50000)
			if err := l.Write(rec); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 300; i++ {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("torn read: %v", err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestPrune(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	l := newLog(t, Options{RetentionDays: 30, Now: func() time.Time { return now }})
	for _, d := range []string{"2026-10-01", "2026-11-01", "2026-11-02", "2026-12-02", "not-a-day"} {
		os.MkdirAll(filepath.Join(l.Dir(), d), 0o755)
	}
	n, err := l.Prune()
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	left, _ := os.ReadDir(l.Dir())
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != ".replaced,2026-11-02,2026-12-02,not-a-day" {
		t.Errorf("left %v", names)
	}
	keep := newLog(t, Options{RetentionDays: 0, Now: func() time.Time { return now }})
	os.MkdirAll(filepath.Join(keep.Dir(), "2000-01-01"), 0o755)
	// Replaced records go after a day whatever the retention.
	for _, d := range []string{"2026-11-30.1-00", "2026-12-01.1-00", "2026-12-02.2-00", "2026-12-02." + keep.tag} {
		os.MkdirAll(filepath.Join(keep.Dir(), ".replaced", d), 0o755)
	}
	if n, _ := keep.Prune(); n != 0 {
		t.Error("retention 0 deleted something")
	}
	if _, err := os.Stat(filepath.Join(keep.Dir(), "2000-01-01")); err != nil {
		t.Error("retention 0 deleted a day folder")
	}
	left, _ = os.ReadDir(filepath.Join(keep.Dir(), ".replaced"))
	names = names[:0]
	for _, e := range left {
		names = append(names, e.Name())
	}
	want := []string{"2026-12-01.1-00", "2026-12-02.2-00", "2026-12-02." + keep.tag}
	sort.Strings(want) // the tag starts with this process's pid
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("replaced folders left: %v", names)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestLogCloseLeavesNoDescriptors: a log that wrote records across two days
// releases every descriptor it opened.
func TestLogCloseLeavesNoDescriptors(t *testing.T) {
	before := openFDs(t)
	l, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range []time.Time{time.Now(), time.Now().AddDate(0, 0, 1)} {
		rec := Record{CallID: string(rune('a' + i)), Timestamp: ts, Status: "pending"}
		if err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Status = "success"
		if err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after Close, %d before", after, before)
	}
}
