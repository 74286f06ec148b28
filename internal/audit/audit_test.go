package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/callinfo"
)

var testReplicas atomic.Int64

func newLog(t *testing.T, opts Options) *Log {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "audit_logs")
	}
	// Each log stands for a process of its own, and two live processes
	// never share a replica's name (its chain).
	if opts.Replica == "" {
		opts.Replica = fmt.Sprintf("test-%d", testReplicas.Add(1))
	}
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func readRecord(t *testing.T, dir string, rec Record) Record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, FileName(rec)))
	if err != nil {
		t.Fatal(err)
	}
	var got Record
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return got
}

// journalFiles returns the names of the journal segments in dir.
func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, journalDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// journalLines returns every line of every segment in dir, parsed.
func journalLines(t *testing.T, dir string) []Record {
	t.Helper()
	var out []Record
	for _, name := range journalFiles(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, journalDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			rec, ok := parseLine(line)
			if !ok {
				t.Fatalf("journal line does not parse: %q", line)
			}
			out = append(out, rec)
		}
	}
	return out
}

// abandon leaves l as a killed process would: the journal's descriptors
// (and with them its locks) are gone, nothing was cleaned up.
func abandon(l *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.cur.Store(nil)
	l.segs.Range(func(k, _ any) bool {
		k.(*segment).end(false)
		return true
	})
	l.files.close()
	// Its chain's lock goes with the process.
	l.chain.close()
}

func TestStartThenFinish(t *testing.T) {
	l := newLog(t, Options{})
	start := time.Date(2026, 12, 2, 10, 30, 0, 123, time.FixedZone("CST", 8*3600))
	rec := Record{CallID: "c1", ToolName: "exec", Arguments: json.RawMessage(`{"command":"ls"}`), Facts: callinfo.Facts{SessionID: "s"}, Timestamp: start}
	st, err := l.Start(rec)
	if err != nil {
		t.Fatal(err)
	}
	// Before the tool runs, the journal knows the call; the day folder has
	// nothing yet.
	lines := journalLines(t, l.Dir())
	if len(lines) != 1 || lines[0].Status != StatusStarted || lines[0].CallID != "c1" || lines[0].ToolName != "exec" {
		t.Fatalf("journal: %+v", lines)
	}
	if args, _ := json.Marshal(lines[0].Arguments); string(args) != `{"command":"ls"}` {
		t.Errorf("journal arguments %s", args)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), FileName(rec))); !os.IsNotExist(err) {
		t.Errorf("record file before the call ended: %v", err)
	}
	if FileName(rec) != filepath.Join("2026-12-02", "20261202T023000.000000123Z_c1.json") {
		t.Errorf("file name %s", FileName(rec))
	}
	rec.Status, rec.Result, rec.DurationMS = "success", "total 0", 5
	if err := l.Finish(st, rec); err != nil {
		t.Fatal(err)
	}
	got := readRecord(t, l.Dir(), rec)
	if got.Status != "success" || got.Result != "total 0" || got.DurationMS != 5 || got.ResultLength != 7 || got.ResultTruncated ||
		got.Timestamp.Location() != time.UTC || got.SessionID != "s" {
		t.Errorf("final record: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Join(l.Dir(), "2026-12-02"))
	if len(entries) != 1 {
		t.Errorf("want exactly one file, no temporaries: %v", entries)
	}
	// Closing a log whose calls are all final leaves no journal behind.
	l.Close()
	if left := journalFiles(t, l.Dir()); len(left) != 0 {
		t.Errorf("journal left after a clean close: %v", left)
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
	rec := Record{CallID: "c2", Timestamp: time.Now(),
		Arguments: json.RawMessage(`{"path":"a","content":"0123456789abcdef","api_key":"abc","nested":{"Password":"hunter2"}}`)}
	st, err := l.Start(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Status, rec.Result = "success", strings.Repeat("界", 25)
	if err := l.Finish(st, rec); err != nil {
		t.Fatal(err)
	}
	got := readRecord(t, l.Dir(), rec)
	if !got.ResultTruncated || got.Result != strings.Repeat("界", 10) || got.ResultLength != 25 {
		t.Errorf("result cut: %+v", got)
	}
	journal, _ := json.Marshal(journalLines(t, l.Dir())[0].Arguments)
	args, _ := json.Marshal(got.Arguments)
	for _, where := range []struct {
		name string
		args []byte
	}{{"record", args}, {"journal", journal}} {
		for _, w := range []string{`"content":"01234567"`, `"api_key":"[REDACTED]"`, `"Password":"[REDACTED]"`, `"path":"a"`} {
			if !strings.Contains(string(where.args), w) {
				t.Errorf("%s arguments lack %s: %s", where.name, w, where.args)
			}
		}
		if strings.Contains(string(where.args), "hunter2") {
			t.Errorf("%s keeps a secret: %s", where.name, where.args)
		}
	}
	if !got.ArgumentsTruncated {
		t.Error("arguments_truncated not set")
	}
}

// TestReconcile: a process dies with calls in flight. The next log on the
// folder records each call that had started without a final record as
// interrupted (with what the journal knew of it), keeps the records that
// were written, and deletes the dead journal. A live process's journal is
// left alone.
func TestReconcile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit_logs")
	now := time.Now().UTC()
	dead := newLog(t, Options{Dir: dir})
	recs := []Record{
		{CallID: "done", ToolName: "read_file", Timestamp: now},
		{CallID: "cut", ToolName: "exec", Facts: callinfo.Facts{SessionID: "s1"}, Timestamp: now.Add(time.Millisecond), Arguments: json.RawMessage(`{"command":"sleep 30"}`)},
		{CallID: "raw", ToolName: "exec", Timestamp: now.Add(2 * time.Millisecond), Arguments: `{"command": "trunc`},
	}
	var sts []Started
	for _, r := range recs {
		st, err := dead.Start(r)
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	done := recs[0]
	done.Status, done.Result = "success", "ok"
	if err := dead.Finish(sts[0], done); err != nil {
		t.Fatal(err)
	}
	live := newLog(t, Options{Dir: dir})
	liveRec := Record{CallID: "live", ToolName: "exec", Timestamp: now}
	if _, err := live.Start(liveRec); err != nil {
		t.Fatal(err)
	}
	deadJournal := journalFiles(t, dir)
	abandon(dead)

	next := newLog(t, Options{Dir: dir})
	if got := readRecord(t, dir, recs[0]); got.Status != "success" || got.Result != "ok" {
		t.Errorf("finished call: %+v", got)
	}
	got := readRecord(t, dir, recs[1])
	if got.Status != StatusInterrupted || got.ErrorCode != CodeInterrupted || got.ToolName != "exec" || got.SessionID != "s1" ||
		!strings.Contains(got.Result, "stopped before this call finished") || !got.Timestamp.Equal(recs[1].Timestamp) {
		t.Errorf("interrupted call: %+v", got)
	}
	if args, _ := json.Marshal(got.Arguments); string(args) != `{"command":"sleep 30"}` {
		t.Errorf("interrupted call's arguments: %s", args)
	}
	if got := readRecord(t, dir, recs[2]); got.Status != StatusInterrupted || got.Arguments != `{"command": "trunc` {
		t.Errorf("call with malformed arguments: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName(liveRec))); !os.IsNotExist(err) {
		t.Errorf("the live process's call was reconciled: %v", err)
	}
	left := journalFiles(t, dir)
	for _, name := range left {
		if !strings.HasPrefix(name, live.tag) && !strings.HasPrefix(name, next.tag) {
			t.Errorf("dead journal %s left (journals before: %v)", name, deadJournal)
		}
	}
	if len(left) != 2 {
		t.Errorf("journals: %v", left)
	}
	// Reconciling again changes nothing.
	if n, err := next.Reconcile(); n != 0 || err != nil {
		t.Errorf("second reconciliation: %d, %v", n, err)
	}
}

// TestJournalRotation: segments roll over by size and by day, and a
// segment is deleted once the last call it noted is final.
func TestJournalRotation(t *testing.T) {
	l := newLog(t, Options{JournalMaxBytes: 300})
	now := time.Now().UTC()
	var sts []Started
	var recs []Record
	for i := range 4 {
		rec := Record{CallID: fmt.Sprint("r", i), ToolName: "read_file", Timestamp: now, Arguments: json.RawMessage(`{"path":"` + strings.Repeat("p", 100) + `"}`)}
		if i == 3 {
			rec.Timestamp = now.AddDate(0, 0, 1)
		}
		st, err := l.Start(rec)
		if err != nil {
			t.Fatal(err)
		}
		sts, recs = append(sts, st), append(recs, rec)
	}
	segs := map[*segment]bool{}
	for _, st := range sts {
		segs[st.seg] = true
	}
	if len(segs) < 3 || sts[2].seg == sts[3].seg {
		t.Fatalf("%d segments for 4 calls of ~200 bytes with 300 a segment and a new day", len(segs))
	}
	if n := len(journalFiles(t, l.Dir())); n != len(segs) {
		t.Errorf("%d journal files, %d segments", n, len(segs))
	}
	for i, st := range sts {
		recs[i].Status = "success"
		if err := l.Finish(st, recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if left := journalFiles(t, l.Dir()); len(left) != 1 || !strings.HasPrefix(left[0], l.tag) {
		t.Errorf("after every call ended, journals %v; want only the current segment", left)
	}
}

// TestJournalFolderDeleted: when someone deletes the journal folder, the
// log notices and notes the next calls in a new segment rather than in a
// file nobody can find.
func TestJournalFolderDeleted(t *testing.T) {
	l := newLog(t, Options{})
	if err := os.RemoveAll(filepath.Join(l.Dir(), journalDir)); err != nil {
		t.Fatal(err)
	}
	l.checked.Store(0) // as if a second had passed
	rec := Record{CallID: "after", Timestamp: time.Now()}
	if _, err := l.Start(rec); err != nil {
		t.Fatal(err)
	}
	if lines := journalLines(t, l.Dir()); len(lines) != 1 || lines[0].CallID != "after" {
		t.Errorf("journal after the folder was deleted: %+v", lines)
	}
}

// TestConcurrentCalls: lines from many calls at once never mix, and
// every call gets its record.
func TestConcurrentCalls(t *testing.T) {
	l := newLog(t, Options{JournalMaxBytes: 8 << 10})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []Record
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				rec := Record{CallID: fmt.Sprintf("g%d-%d", g, i), ToolName: "read_file", Timestamp: time.Now(),
					Arguments: json.RawMessage(`{"path":"` + strings.Repeat("x", i*10) + `"}`)}
				st, err := l.Start(rec)
				if err != nil {
					t.Error(err)
					return
				}
				rec.Status = "success"
				if err := l.Finish(st, rec); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, rec)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, rec := range all {
		if got := readRecord(t, l.Dir(), rec); got.Status != "success" {
			t.Fatalf("%s: %+v", rec.CallID, got)
		}
	}
	journalLines(t, l.Dir()) // fails on a mixed line
	if len(all) != 400 {
		t.Errorf("%d calls recorded", len(all))
	}
}

// faultCase is a way of making the log's writes fail.
type faultCase struct {
	name string
	// setup returns a fresh log, a function that makes its writes fail
	// from then on, and one that makes them work again.
	setup func(t *testing.T) (l *Log, fail, heal func())
}

func faultCases(t *testing.T) []faultCase {
	cases := []faultCase{{"injected", func(t *testing.T) (*Log, func(), func()) {
		l := newLog(t, Options{})
		var mu sync.Mutex
		broken := false
		l.inject = func(string) error {
			mu.Lock()
			defer mu.Unlock()
			if broken {
				return syscall.ENOSPC
			}
			return nil
		}
		set := func(b bool) func() { return func() { mu.Lock(); broken = b; mu.Unlock() } }
		return l, set(true), set(false)
	}}}
	// A really full file system, where this process may mount one.
	probe := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe).Run(); err != nil {
		t.Logf("no tmpfs (mount refused: %v): only injected faults", err)
		return cases
	}
	exec.Command("umount", probe).Run()
	return append(cases, faultCase{"full tmpfs", func(t *testing.T) (*Log, func(), func()) {
		mnt := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
			t.Fatalf("mount: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
		l := newLog(t, Options{Dir: filepath.Join(mnt, "audit_logs")})
		fill := filepath.Join(mnt, "fill")
		return l, func() {
			f, err := os.Create(fill)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			chunk := make([]byte, 4096)
			for {
				if _, err := f.Write(chunk); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatal(err)
					}
					return
				}
			}
		}, func() { os.Remove(fill) }
	}})
}

// TestStartFault: when the journal cannot be written, Start fails and
// the fault is counted; the refused call leaves no line, and the log works
// again once the disk does.
func TestStartFault(t *testing.T) {
	for _, c := range faultCases(t) {
		t.Run(c.name, func(t *testing.T) {
			l, fail, heal := c.setup(t)
			fail()
			rec := Record{CallID: "nospace", Timestamp: time.Now()}
			if _, err := l.Start(rec); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Start on a full disk: %v", err)
			}
			if s := l.Stats(); s.StartFaults != 1 || s.RecordFaults != 0 {
				t.Errorf("stats %+v", s)
			}
			heal()
			rec.CallID = "healed"
			st, err := l.Start(rec)
			if err != nil {
				t.Fatal(err)
			}
			rec.Status = "success"
			if err := l.Finish(st, rec); err != nil {
				t.Fatal(err)
			}
			readRecord(t, l.Dir(), rec)
			for _, line := range journalLines(t, l.Dir()) {
				if line.CallID == "nospace" {
					t.Error("the refused call is in the journal")
				}
			}
		})
	}
}

// TestRecordFault: when the final record cannot be written, Finish fails,
// the fault is counted, and the record is kept in the journal, so the
// next start writes it with its real outcome, not as interrupted.
func TestRecordFault(t *testing.T) {
	for _, c := range faultCases(t) {
		t.Run(c.name, func(t *testing.T) {
			l, fail, heal := c.setup(t)
			rec := Record{CallID: "ran", ToolName: "write_file", Timestamp: time.Now()}
			st, err := l.Start(rec)
			if err != nil {
				t.Fatal(err)
			}
			fail()
			if c.name == "injected" {
				// The journal still takes the record: only files fail.
				l.inject = func(op string) error {
					if op == "record" {
						return syscall.ENOSPC
					}
					return nil
				}
			}
			rec.Status, rec.Result, rec.DurationMS = "success", "Wrote 3 bytes", 7
			if err := l.Finish(st, rec); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Finish on a full disk: %v", err)
			}
			if s := l.Stats(); s.StartFaults != 0 || s.RecordFaults != 1 {
				t.Errorf("stats %+v", s)
			}
			if _, err := os.Stat(filepath.Join(l.Dir(), FileName(rec))); !os.IsNotExist(err) {
				t.Errorf("a record file after the fault: %v", err)
			}
			l.Close()
			heal()
			next := newLog(t, Options{Dir: l.Dir()})
			got := readRecord(t, l.Dir(), rec)
			if got.Status != "success" || got.Result != "Wrote 3 bytes" || got.DurationMS != 7 || got.ToolName != "write_file" {
				t.Errorf("record written at the next start: %+v", got)
			}
			if left := journalFiles(t, l.Dir()); len(left) != 1 || !strings.HasPrefix(left[0], next.tag) {
				t.Errorf("journals: %v", left)
			}
		})
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

// TestCloseLeavesNoDescriptors: a log that wrote records across two days
// releases every descriptor it opened.
func TestCloseLeavesNoDescriptors(t *testing.T) {
	before := openFDs(t)
	l, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range []time.Time{time.Now(), time.Now().AddDate(0, 0, 1)} {
		rec := Record{CallID: string(rune('a' + i)), Timestamp: ts}
		st, err := l.Start(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.Status = "success"
		if err := l.Finish(st, rec); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after Close, %d before", after, before)
	}
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
	sort.Strings(names)
	if strings.Join(names, ",") != ".journal,2026-11-02,2026-12-02,chain,not-a-day" {
		t.Errorf("left %v", names)
	}
	keep := newLog(t, Options{RetentionDays: 0, Now: func() time.Time { return now }})
	os.MkdirAll(filepath.Join(keep.Dir(), "2000-01-01"), 0o755)
	if n, _ := keep.Prune(); n != 0 {
		t.Error("retention 0 deleted something")
	}
	if _, err := os.Stat(filepath.Join(keep.Dir(), "2000-01-01")); err != nil {
		t.Error("retention 0 deleted a day folder")
	}
}

// TestLongArgumentsCutBeforeDecoding: arguments whose strings are cut
// before they are decoded give the record the whole decoding gives.
func TestLongArgumentsCutBeforeDecoding(t *testing.T) {
	l := &Log{opts: Options{MaxArgChars: 50}}
	whole := func(raw json.RawMessage) (json.RawMessage, bool) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		cut := false
		v = l.clean(v, &cut)
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return out, cut
	}
	long := func(unit string, n int) string { return strings.Repeat(unit, n) }
	for _, raw := range []string{
		`{"path":"a","content":"` + long(`x\n\"\\\t`, 400) + `"}`,
		`{"content":"` + long(`\ud83d\ude00é€`, 300) + `","api_key":"` + long("k", 2000) + `","n":1.50}`,
		`{"list":["` + long(`<&>`, 600) + `",{"deep":"` + long(`\u00e9`, 700) + `"}],"` + long("K", 700) + `":"v"}`,
		`{"edge":"` + long("a", 12*52) + `","edge2":"` + long("a", 12*52+1) + `","ok":"short"}`,
	} {
		got, gotCut := l.cleanArguments(json.RawMessage(raw), true)
		want, wantCut := whole(json.RawMessage(raw))
		if string(got.(json.RawMessage)) != string(want) || gotCut != wantCut {
			t.Errorf("cleanArguments(%.60s...):\n%s %v\nwant\n%s %v", raw, got, gotCut, want, wantCut)
		}
	}
}
