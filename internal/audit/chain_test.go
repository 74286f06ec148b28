package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testKey writes a fresh Ed25519 key as openssl genpkey does (PKCS#8
// PEM) and returns its file and public half.
func testKey(t testing.TB) (string, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}

// writeCalls runs n calls through l from workers goroutines, as the
// service does, each on its own clock tick from start.
func writeCalls(t testing.TB, l *Log, n, workers int, start time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				rec := Record{CallID: fmt.Sprintf("call-%d-%06d", start.Unix(), i), ToolName: []string{"read_file", "exec", "web_fetch"}[i%3],
					Arguments: json.RawMessage(`{"path":"a.txt"}`), Timestamp: start.Add(time.Duration(i) * time.Second)}
				rec.Key = []string{"alice", "bob"}[i%2]
				st, err := l.Start(rec)
				if err != nil {
					t.Error(err)
					return
				}
				rec.Status, rec.Result = "success", fmt.Sprintf("result %d", i)
				if i%7 == 0 {
					rec.Status, rec.ErrorCode = "error", "tool_error"
				}
				if err := l.Finish(st, rec); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func mustVerify(t testing.TB, dir string, pub ed25519.PublicKey) *Report {
	t.Helper()
	rep, err := Verify(dir, VerifyOptions{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestChainLinksEveryRecord: records finished at once from many
// goroutines form one chain, 1..n, each prev the hash of the file before,
// the lines on stdout the files' bytes; the digest at Close seals the
// last, signed; Verify finds nothing wrong.
func TestChainLinksEveryRecord(t *testing.T) {
	keyFile, pub := testKey(t)
	dir := filepath.Join(t.TempDir(), "audit_logs")
	var out lockedBuffer
	l := newLog(t, Options{Dir: dir, Replica: "r1", SigningKeyFile: keyFile, Stdout: &out})
	writeCalls(t, l, 200, 8, time.Now())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(out.String(), "\n"), "\n")
	prev := genesisHash
	for i, line := range lines {
		if !strings.HasSuffix(line, "\n") {
			line += "\n"
		}
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Seq != uint64(i+1) || rec.Prev != prev {
			t.Fatalf("stdout line %d: seq %d prev %s, want %d %s", i, rec.Seq, rec.Prev, i+1, prev)
		}
		data, err := os.ReadFile(filepath.Join(dir, FileName(rec)))
		if err != nil || !bytes.Equal(data, []byte(line)) {
			t.Fatalf("record %d differs from its stdout line (%v)", rec.Seq, err)
		}
		sum := sha256.Sum256(data)
		prev = hex.EncodeToString(sum[:])
	}
	rep := mustVerify(t, dir, pub)
	if len(rep.Problems) > 0 || rep.Records != 200 || rep.Signed != 1 || rep.Unsealed != 0 {
		t.Fatalf("verify: %+v", rep)
	}
	// Another key's signatures do not verify.
	_, other := testKey(t)
	if rep := mustVerify(t, dir, other); len(rep.Problems) == 0 || rep.Problems[0].Kind != KindBadSignature {
		t.Fatalf("verify with another key: %+v", rep.Problems)
	}
}

// TestChainGoesOnAfterRestart: the next process of a replica continues
// its chain, after a clean stop and after one killed (whose calls left
// open join the chain as interrupted records, and whose head file names
// a record that never appeared).
func TestChainGoesOnAfterRestart(t *testing.T) {
	keyFile, pub := testKey(t)
	dir := filepath.Join(t.TempDir(), "audit_logs")
	opts := Options{Dir: dir, Replica: "r1", SigningKeyFile: keyFile}
	start := time.Now()
	l := newLog(t, opts)
	writeCalls(t, l, 10, 2, start)
	l.Close()
	l = newLog(t, opts)
	writeCalls(t, l, 10, 2, start.Add(time.Hour))
	if _, err := l.Start(Record{CallID: "open", ToolName: "exec", Timestamp: start.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// The head names a record that never appeared: the process died
	// between the two writes.
	if err := l.chain.writeHead(21, [32]byte{1}, l.chain.hash, "2000-01-01/none.json"); err != nil {
		t.Fatal(err)
	}
	abandon(l)
	if rep := mustVerify(t, dir, pub); len(rep.Problems) > 0 || rep.Unsealed != 10 {
		t.Fatalf("verify after the kill: %+v", rep)
	}
	l = newLog(t, opts)
	writeCalls(t, l, 5, 1, start.Add(3*time.Hour))
	l.Close()
	rep := mustVerify(t, dir, pub)
	if len(rep.Problems) > 0 || rep.Records != 26 || rep.Unsealed != 0 {
		t.Fatalf("verify: %+v", rep)
	}
	interrupted := readRecord(t, dir, Record{CallID: "open", Timestamp: start.Add(2 * time.Hour)})
	if interrupted.Status != StatusInterrupted || interrupted.Seq != 21 {
		t.Fatalf("the interrupted call: seq %d status %s, want 21 interrupted", interrupted.Seq, interrupted.Status)
	}
}

// TestRetentionCutVerifies: days retention deletes are named in a digest
// written before they go, so the holes they leave verify; a day deleted
// by hand does not.
func TestRetentionCutVerifies(t *testing.T) {
	keyFile, pub := testKey(t)
	dir := filepath.Join(t.TempDir(), "audit_logs")
	now := time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC)
	l := newLog(t, Options{Dir: dir, Replica: "r1", SigningKeyFile: keyFile, RetentionDays: 3, Now: func() time.Time { return now }})
	// Calls over six days, finished out of order across midnight.
	writeCalls(t, l, 60, 4, now.AddDate(0, 0, -6).Add(-time.Hour))
	writeCalls(t, l, 60, 4, now.AddDate(0, 0, -6).Add(time.Hour))
	for d := range 6 {
		writeCalls(t, l, 20, 4, now.AddDate(0, 0, d-5))
	}
	if err := l.Digest(); err != nil {
		t.Fatal(err)
	}
	n, err := l.Prune()
	if err != nil || n == 0 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	writeCalls(t, l, 10, 2, now.Add(time.Hour))
	l.Close()
	rep := mustVerify(t, dir, pub)
	if len(rep.Problems) > 0 || rep.Cut == 0 {
		t.Fatalf("verify after retention: %+v", rep)
	}
	days, _ := filepath.Glob(filepath.Join(dir, "2026-12-*"))
	if err := os.RemoveAll(days[0]); err != nil {
		t.Fatal(err)
	}
	rep = mustVerify(t, dir, pub)
	if len(rep.Problems) == 0 || rep.Problems[0].Kind != KindMissing {
		t.Fatalf("a day deleted by hand: %+v", rep.Problems)
	}
}

// TestFastChainedMatchesJSON: the fast reading of a record gives what
// decoding it gives, or declines, for records whose arguments and result
// hold the very member names it looks for.
func TestFastChainedMatchesJSON(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 30, 0, 123456789, time.UTC)
	dc := ts.Add(time.Minute)
	recs := []Record{
		{Seq: 3, Prev: genesisHash, CallID: "c1", ToolName: "read_file", Arguments: json.RawMessage(`{"a":1,"replica":"x","timestamp":"2000-01-01T00:00:00Z"}`), Replica: "r", Timestamp: ts, Status: "success", Result: `,"replica":"y" ,"timestamp":"z"`},
		{Seq: 4, Prev: genesisHash, CallID: `c"2\`, ToolName: "exec", Timestamp: ts, Status: "error", ErrorCode: "e"},
		{Seq: 5, Prev: genesisHash, CallID: "c3", ToolName: "exec", Timestamp: ts, Status: "success", Approval: &Approval{ID: "a", Outcome: "approved", DecidedAt: &dc}},
		{Seq: 6, Prev: genesisHash, CallID: "c4", Arguments: `"replica":"q"`, Replica: `r"1`, Timestamp: ts},
	}
	for _, rec := range recs {
		data, err := appendRecord(nil, &rec)
		if err != nil {
			t.Fatal(err)
		}
		var want chained
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if got, ok := fastChained(data); ok && got != want {
			t.Errorf("record %s: fast %+v, decoded %+v", rec.CallID, got, want)
		}
		e := parseEntry(filepath.ToSlash(FileName(rec)), data)
		if e.seq != want.Seq || e.chain != want.Replica || e.callID != want.CallID || !e.when.Equal(want.Timestamp) || !e.nameOK || e.damage != "" {
			t.Errorf("record %s: entry %+v", rec.CallID, e)
		}
	}
}
