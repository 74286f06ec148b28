package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCall measures what one call costs the audit log (a journal line
// and a record file), beside its parts alone, and what syncing the journal
// line to the disk at every call would add. "after a pause" waits two
// milliseconds, untimed, before each call, as the tool's own work would:
// the file made ahead for the next record is then ready. The folder is a
// temporary one, or AUDIT_BENCH_DIR (to compare file systems).
//
//	go test -run '^$' -bench Call ./internal/audit/
func BenchmarkCall(b *testing.B) {
	for _, c := range []struct {
		name  string
		start bool
		sync  bool
		final bool
		pause bool
	}{
		{"start+finish", true, false, true, false},
		{"start+finish without the chain", true, false, true, false},
		{"start+finish after a pause", true, false, true, true},
		{"record file only", false, false, true, false},
		{"journal line only", true, false, false, false},
		{"journal line+fdatasync", true, true, false, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir, err := os.MkdirTemp(os.Getenv("AUDIT_BENCH_DIR"), "auditbench")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			l, err := New(Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if strings.HasSuffix(c.name, "without the chain") {
				l.chain.close()
				l.chain = nil
			}
			rec := Record{Timestamp: time.Now(), ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}
			for i := 0; b.Loop(); i++ {
				rec.CallID = fmt.Sprint(i)
				if c.pause {
					b.StopTimer()
					time.Sleep(2 * time.Millisecond)
					b.StartTimer()
				}
				var st Started
				if c.start {
					if st, err = l.Start(rec); err != nil {
						b.Fatal(err)
					}
					if c.sync {
						if err := st.seg.f.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if c.final {
					rec.Status, rec.Result = "success", "hello"
					if err := l.Finish(st, rec); err != nil {
						b.Fatal(err)
					}
				} else {
					st.seg.release()
				}
			}
		})
	}
}

// BenchmarkChainCost measures what the chain adds to a call (Start and
// Finish): its seq and prev, the SHA-256 of the record, the head file's
// pwrite and the mutex that orders them. Two logs, one with its chain and
// one without, take turns call by call, in the same folder, so that the
// machine's moods hit both alike; the medians of their calls are
// reported, with their difference and ratio. "8 goroutines" finishes
// calls from eight goroutines at once, where the chain's mutex is
// contended.
//
//	AUDIT_BENCH_DIR=/dev/shm go test -run '^$' -bench ChainCost -benchtime 20000x ./internal/audit/
func BenchmarkChainCost(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("%d goroutines", workers), func(b *testing.B) {
			root, err := os.MkdirTemp(os.Getenv("AUDIT_BENCH_DIR"), "auditbench")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(root)
			logs := [2]*Log{}
			for i := range logs {
				if logs[i], err = New(Options{Dir: filepath.Join(root, fmt.Sprint(i)), Replica: fmt.Sprint("bench-", i), DigestInterval: -1}); err != nil {
					b.Fatal(err)
				}
				defer logs[i].Close()
			}
			logs[1].chain.close()
			logs[1].chain = nil
			var mu sync.Mutex
			took := [2][]time.Duration{}
			var next atomic.Int64
			b.SetParallelism(workers)
			b.RunParallel(func(pb *testing.PB) {
				var mine [2][]time.Duration
				for pb.Next() {
					i := next.Add(1)
					// Which log goes first alternates.
					for k := range 2 {
						which := (int(i) + k) % 2
						mine[which] = append(mine[which], benchCall(b, logs[which], i))
					}
				}
				mu.Lock()
				took[0], took[1] = append(took[0], mine[0]...), append(took[1], mine[1]...)
				mu.Unlock()
			})
			with, without := median(took[0]), median(took[1])
			b.ReportMetric(float64(with.Nanoseconds()), "chained-ns/call")
			b.ReportMetric(float64(without.Nanoseconds()), "unchained-ns/call")
			b.ReportMetric(float64((with - without).Nanoseconds()), "added-ns/call")
			b.ReportMetric(float64(with)/float64(without), "ratio")
		})
	}
}

func benchCall(b *testing.B, l *Log, i int64) time.Duration {
	rec := Record{CallID: strconv.FormatInt(i, 10), ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`), Timestamp: time.Now()}
	began := time.Now()
	st, err := l.Start(rec)
	if err != nil {
		b.Fatal(err)
	}
	rec.Status, rec.Result = "success", "hello"
	if err := l.Finish(st, rec); err != nil {
		b.Fatal(err)
	}
	return time.Since(began)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkVerify measures Verify (toolsvc audit verify) over a log of
// AUDIT_VERIFY_RECORDS records (default 100,000) written by the real Log
// from four goroutines, signed, in AUDIT_BENCH_DIR (or kept in
// AUDIT_VERIFY_DIR); the records spread over days as a service's do.
// Writing them is not timed; the signatures are checked against the key
// each digest names.
//
//	AUDIT_BENCH_DIR=/dev/shm AUDIT_VERIFY_RECORDS=1000000 go test -run '^$' -bench Verify -benchtime 3x -timeout 30m ./internal/audit/
func BenchmarkVerify(b *testing.B) {
	n := 100000
	if s := os.Getenv("AUDIT_VERIFY_RECORDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	dir := verifyBenchLog(b, n)
	for b.Loop() {
		rep, err := Verify(dir, VerifyOptions{})
		if err != nil || len(rep.Problems) > 0 || rep.Records != n {
			b.Fatalf("verify: %v %+v", err, rep)
		}
	}
	b.ReportMetric(float64(n)/(b.Elapsed().Seconds()/float64(b.N)), "records/s")
}

// verifyBenchLog writes the log BenchmarkVerify reads: in a temporary
// folder, or in AUDIT_VERIFY_DIR, where it is kept for the next run (a
// million records take minutes to write).
func verifyBenchLog(b *testing.B, n int) string {
	dir := os.Getenv("AUDIT_VERIFY_DIR")
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, chainDir)); err == nil {
			return dir
		}
	} else {
		var err error
		if dir, err = os.MkdirTemp(os.Getenv("AUDIT_BENCH_DIR"), "auditverify"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	keyFile, _ := testKey(b)
	l, err := New(Options{Dir: dir, Replica: "bench", SigningKeyFile: keyFile, DigestInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	writeCalls(b, l, n, 4, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l.Close()
	return dir
}
