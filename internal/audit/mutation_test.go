package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mutLog is a log of real records to tamper with: its files by seq.
type mutLog struct {
	dir   string
	files []string // files[seq-1]: the record's path under dir
}

// newMutLog writes n records through a real Log, from eight goroutines
// at once as the service's calls finish, with a digest every thousand
// records and the last at Close, signed.
func newMutLog(t *testing.T, n int) (*mutLog, func() *Report) {
	keyFile, pub := testKey(t)
	dir := filepath.Join(t.TempDir(), "audit_logs")
	l := newLog(t, Options{Dir: dir, Replica: "toolsvc-0", SigningKeyFile: keyFile, DigestInterval: -1})
	start := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	for i := 0; i < n; i += 1000 {
		writeCalls(t, l, min(1000, n-i), 8, start.Add(time.Duration(i)*7*time.Second))
		if err := l.Digest(); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	m := &mutLog{dir: dir, files: make([]string, n)}
	files, err := recordFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, _ := os.ReadFile(filepath.Join(dir, f))
		var rec Record
		if err := json.Unmarshal(data, &rec); err != nil || rec.Seq == 0 || int(rec.Seq) > n {
			t.Fatalf("%s: seq %d: %v", f, rec.Seq, err)
		}
		m.files[rec.Seq-1] = f
	}
	return m, func() *Report { return mustVerify(t, dir, pub) }
}

func (m *mutLog) path(seq int) string { return filepath.Join(m.dir, m.files[seq-1]) }

func (m *mutLog) read(t *testing.T, seq int) []byte {
	data, err := os.ReadFile(m.path(seq))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (m *mutLog) write(t *testing.T, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// mutation is one change to the log: apply makes it and returns what
// Verify must name first (kind, and the file or the seq) and how to undo
// it.
type mutation struct {
	name  string
	apply func(t *testing.T) (kind, file string, seq uint64, undo func())
}

// TestMutations: over a 10,000-record log, every single edit, deletion,
// insertion, reordering and truncation, at the ends and at random places,
// is found, named first, and put on the right record; the log verifies
// clean before and after.
func TestMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10,000 records")
	}
	const n = 10000
	m, verify := newMutLog(t, n)
	if rep := verify(); len(rep.Problems) > 0 || rep.Records != n || rep.Signed != n/1000 {
		t.Fatalf("the log before any change: %+v", rep)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	picks := []int{1, 2, n / 2, 1000, 1001, n - 1, n}
	for range 12 {
		picks = append(picks, 1+rng.IntN(n))
	}
	var muts []mutation
	for _, seq := range picks {
		muts = append(muts, m.edits(seq, rng)...)
		muts = append(muts, m.deletion(seq), m.copyInsertion(seq), m.fileTruncation(seq, rng))
		muts = append(muts, m.reordering(seq, 1+rng.IntN(n)))
	}
	muts = append(muts, m.forgedInsertion(), m.appendedInsertion(), m.logTruncation(1), m.logTruncation(50))
	muts = append(muts, m.digestMutations()...)
	for _, mu := range muts {
		kind, file, seq, undo := mu.apply(t)
		rep := verify()
		undo()
		if len(rep.Problems) == 0 {
			t.Errorf("%s: not found", mu.name)
			continue
		}
		p := rep.Problems[0]
		if p.Kind != kind || (file != "" && p.File != file) || (seq != 0 && p.Seq != seq) {
			t.Errorf("%s: first problem %+v, want %s of %s seq %d (%d problems)", mu.name, p, kind, file, seq, len(rep.Problems))
		}
	}
	t.Logf("%d mutations", len(muts))
	if rep := verify(); len(rep.Problems) > 0 {
		t.Fatalf("the log after undoing every change: %+v", rep.Problems)
	}
}

// edits change one byte of the record: at random, in its seq, its prev,
// its call ID, its replica and its last byte.
func (m *mutLog) edits(seq int, rng *rand.Rand) []mutation {
	var muts []mutation
	at := func(name string, where func(data []byte) int) {
		muts = append(muts, mutation{fmt.Sprintf("edit %s of seq %d", name, seq), func(t *testing.T) (string, string, uint64, func()) {
			data := m.read(t, seq)
			i := where(data)
			changed := bytes.Clone(data)
			changed[i] = "0123456789abcdefxyz\"{,"[rng.IntN(22)]
			for changed[i] == data[i] {
				changed[i] = "0123456789abcdefxyz\"{,"[rng.IntN(22)]
			}
			m.write(t, m.path(seq), changed)
			return KindEdited, m.files[seq-1], 0, func() { m.write(t, m.path(seq), data) }
		}})
	}
	at("a random byte", func(data []byte) int { return rng.IntN(len(data)) })
	at("the seq", func(data []byte) int { return len(`{"seq":`) })
	at("the prev", func(data []byte) int { return bytes.Index(data, []byte(`"prev":"`)) + 8 + rng.IntN(64) })
	at("the call ID", func(data []byte) int { return bytes.Index(data, []byte(`"call_id":"`)) + 12 })
	at("the replica", func(data []byte) int { return bytes.Index(data, []byte(`"replica":"`)) + 12 })
	at("the last byte", func(data []byte) int { return len(data) - 1 })
	return muts
}

func (m *mutLog) deletion(seq int) mutation {
	return mutation{fmt.Sprintf("delete seq %d", seq), func(t *testing.T) (string, string, uint64, func()) {
		data := m.read(t, seq)
		os.Remove(m.path(seq))
		kind := KindMissing
		if seq == len(m.files) {
			kind = KindTruncated // the end of the chain, sealed by the last digest
		}
		return kind, "", uint64(seq), func() { m.write(t, m.path(seq), data) }
	}}
}

// copyInsertion adds a copy of a record under another call's name.
func (m *mutLog) copyInsertion(seq int) mutation {
	return mutation{fmt.Sprintf("insert a copy of seq %d", seq), func(t *testing.T) (string, string, uint64, func()) {
		data := m.read(t, seq)
		var rec Record
		json.Unmarshal(data, &rec)
		forged := bytes.Replace(data, []byte(rec.CallID), []byte("forged-"+rec.CallID), 1)
		rec.CallID = "forged-" + rec.CallID
		path := filepath.Join(m.dir, FileName(rec))
		m.write(t, path, forged)
		return KindInserted, filepath.ToSlash(FileName(rec)), 0, func() { os.Remove(path) }
	}}
}

// forgedInsertion adds a record as the log wrote them before the chain.
func (m *mutLog) forgedInsertion() mutation {
	return mutation{"insert a record without a seq", func(t *testing.T) (string, string, uint64, func()) {
		rec := Record{CallID: "forged", ToolName: "exec", Timestamp: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC), Status: "success", Replica: "toolsvc-0"}
		data, _ := appendRecord(nil, &rec)
		path := filepath.Join(m.dir, FileName(rec))
		m.write(t, path, data)
		return KindInserted, filepath.ToSlash(FileName(rec)), 0, func() { os.Remove(path) }
	}}
}

// appendedInsertion adds a record after the last, tied to it.
func (m *mutLog) appendedInsertion() mutation {
	return mutation{"insert a record after the last", func(t *testing.T) (string, string, uint64, func()) {
		last := m.read(t, len(m.files))
		rec := Record{Seq: uint64(len(m.files) + 1), Prev: hexOf(sha256Sum(last)), CallID: "forged-last", ToolName: "exec",
			Timestamp: time.Date(2026, 12, 9, 0, 0, 0, 0, time.UTC), Status: "success", Replica: "toolsvc-0"}
		data, _ := appendRecord(nil, &rec)
		path := filepath.Join(m.dir, FileName(rec))
		os.MkdirAll(filepath.Dir(path), 0o750)
		m.write(t, path, data)
		return KindInserted, filepath.ToSlash(FileName(rec)), 0, func() { os.RemoveAll(filepath.Dir(path)) }
	}}
}

// reordering swaps the contents of two records' files.
func (m *mutLog) reordering(a, b int) mutation {
	if a == b {
		b = a%len(m.files) + 1
	}
	return mutation{fmt.Sprintf("swap seq %d and %d", a, b), func(t *testing.T) (string, string, uint64, func()) {
		da, db := m.read(t, a), m.read(t, b)
		m.write(t, m.path(a), db)
		m.write(t, m.path(b), da)
		return KindReordered, "", uint64(min(a, b)), func() { m.write(t, m.path(a), da); m.write(t, m.path(b), db) }
	}}
}

// fileTruncation cuts a record's file short.
func (m *mutLog) fileTruncation(seq int, rng *rand.Rand) mutation {
	cut := rng.IntN(400)
	return mutation{fmt.Sprintf("cut seq %d's file to %d bytes", seq, cut), func(t *testing.T) (string, string, uint64, func()) {
		data := m.read(t, seq)
		m.write(t, m.path(seq), data[:min(cut, len(data)-1)])
		return KindTruncated, m.files[seq-1], uint64(seq), func() { m.write(t, m.path(seq), data) }
	}}
}

// logTruncation deletes the last k records.
func (m *mutLog) logTruncation(k int) mutation {
	return mutation{fmt.Sprintf("delete the last %d records", k), func(t *testing.T) (string, string, uint64, func()) {
		n := len(m.files)
		saved := map[string][]byte{}
		for seq := n - k + 1; seq <= n; seq++ {
			saved[m.path(seq)] = m.read(t, seq)
			os.Remove(m.path(seq))
		}
		return KindTruncated, "", uint64(n - k + 1), func() {
			for p, data := range saved {
				m.write(t, p, data)
			}
		}
	}}
}

// digestMutations change the digests: a sealed seq, a signature, a line
// deleted, the last line cut short.
func (m *mutLog) digestMutations() []mutation {
	files, _ := filepath.Glob(filepath.Join(m.dir, chainDir, "*", "digests-*.jsonl"))
	sort.Strings(files)
	file := files[len(files)-1]
	change := func(name, kind string, fn func(lines []string) []string) mutation {
		return mutation{name, func(t *testing.T) (string, string, uint64, func()) {
			data, _ := os.ReadFile(file)
			lines := strings.SplitAfter(string(data), "\n")
			m.write(t, file, []byte(strings.Join(fn(lines[:len(lines)-1]), "")))
			return kind, "", 0, func() { m.write(t, file, data) }
		}}
	}
	return []mutation{
		change("a digest's seq edited", KindBadSignature, func(l []string) []string {
			var d Digest
			json.Unmarshal([]byte(l[3]), &d)
			l[3] = strings.Replace(l[3], `"seq":`+strconv.FormatUint(d.Seq, 10), `"seq":`+strconv.FormatUint(d.Seq-1, 10), 1)
			return l
		}),
		change("a digest's signature edited", KindBadSignature, func(l []string) []string {
			i := strings.Index(l[5], `"sig":"`) + 8
			c := "A"
			if l[5][i] == 'A' {
				c = "B"
			}
			l[5] = l[5][:i] + c + l[5][i+1:]
			return l
		}),
		change("a digest deleted", KindMissing, func(l []string) []string { return append(l[:4], l[5:]...) }),
		change("the last digest cut short", KindTruncated, func(l []string) []string {
			l[len(l)-1] = l[len(l)-1][:40]
			return l
		}),
	}
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
