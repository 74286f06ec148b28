package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What Verify finds wrong with a record or a digest.
const (
	KindEdited       = "edited"        // its bytes changed since it was written
	KindMissing      = "missing"       // deleted, and not by retention
	KindInserted     = "inserted"      // not written by the service
	KindReordered    = "reordered"     // moved to another record's place (file)
	KindTruncated    = "truncated"     // cut short: a file, or the chain's end
	KindBadSignature = "bad signature" // a digest not signed by the key
)

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// PublicKey checks every digest's signature; nil: each is checked
	// against the key it names (which shows a digest edited, not one
	// forged with another key).
	PublicKey ed25519.PublicKey
	// Progress, when set, is called now and then with the record files
	// read so far and their number.
	Progress func(done, total int)
}

// Problem is one thing wrong in the log.
type Problem struct {
	Kind   string `json:"kind"`
	Chain  string `json:"chain"`
	Seq    uint64 `json:"seq,omitempty"`  // the record's place in its chain, when known
	File   string `json:"file,omitempty"` // under the audit folder
	Detail string `json:"detail"`
}

// Report is what Verify found.
type Report struct {
	Records   int       `json:"records"`   // record files read
	Chains    int       `json:"chains"`    // replicas' chains
	Digests   int       `json:"digests"`   // digest lines read
	Signed    int       `json:"signed"`    // of which signed, with a good signature
	Cut       uint64    `json:"cut"`       // records retention deleted, as digests say
	Unsealed  int       `json:"unsealed"`  // records after their chain's last digest
	Unchained int       `json:"unchained"` // records written before the chain existed
	Problems  []Problem `json:"problems"`  // in the order of the chains, first bad record first
}

// entry is one record file as Verify reads it.
type entry struct {
	file     string
	hash     [32]byte
	seq      uint64
	prev     [32]byte
	hasPrev  bool
	chain    string
	callID   string
	when     time.Time
	nameOK   bool
	damage   string // KindTruncated or KindEdited when it is no record
	pos      uint64 // its place, from its link to the record before it
	reported bool
}

// Verify checks the audit folder dir: every record's place in its
// replica's chain, the digests that seal the chains and their signatures,
// and what retention cut. It returns an error only when it cannot read
// the folder; what it finds wrong is in the report's problems.
func Verify(dir string, opts VerifyOptions) (*Report, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	files, err := recordFiles(dir)
	if err != nil {
		return nil, err
	}
	entries, err := readEntries(dir, files, opts.Progress)
	if err != nil {
		return nil, err
	}
	rep := &Report{Records: len(entries)}
	chains, err := readChains(dir, opts.PublicKey, rep)
	if err != nil {
		return nil, err
	}
	verifyEntries(entries, chains, rep)
	return rep, nil
}

// recordFiles lists the record files of every day folder, in order.
func recordFiles(dir string) ([]string, error) {
	days, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, d := range days {
		if _, err := time.Parse(dayLayout, d.Name()); err != nil || !d.IsDir() {
			continue
		}
		names, err := os.ReadDir(filepath.Join(dir, d.Name()))
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if strings.HasSuffix(n.Name(), ".json") && !strings.HasPrefix(n.Name(), ".") {
				files = append(files, d.Name()+"/"+n.Name())
			}
		}
	}
	return files, nil
}

// readEntries reads the record files, a worker per processor.
func readEntries(dir string, files []string, progress func(int, int)) ([]*entry, error) {
	r, err := newFileReader(dir, files)
	if err != nil {
		return nil, err
	}
	defer r.close()
	entries := make([]*entry, len(files))
	var next, done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range verifyWorkers() {
		wg.Go(func() {
			buf := make([]byte, 16<<10)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				data, err := r.read(files[i], &buf)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				entries[i] = parseEntry(files[i], data)
				done.Add(1)
			}
		})
	}
	if progress != nil {
		stop := make(chan struct{})
		go func() { wg.Wait(); close(stop) }()
		t := time.NewTicker(200 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case <-stop:
				waiting = false
			case <-t.C:
				progress(int(done.Load()), len(files))
			}
		}
		t.Stop()
		progress(int(done.Load()), len(files))
	}
	wg.Wait()
	return entries, firstErr
}

// fastChained reads a record as the service writes it, without a JSON
// decoder: its place first, then its call ID; the replica and the
// timestamp are the last members of those names (the arguments before
// them may hold such names, nothing after them can). It reports false
// for anything else, which parseEntry then decodes. A record read this way
// may still hold invalid JSON past these members; its hash tells.
func fastChained(data []byte) (chained, bool) {
	var f chained
	rest, ok := bytes.CutPrefix(data, []byte(`{"seq":`))
	i := bytes.IndexByte(rest, ',')
	if !ok || i < 0 || !bytes.HasSuffix(data, []byte("}\n")) {
		return f, false
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"prev":"`))
	if err != nil || !ok || len(rest) < 64 {
		return f, false
	}
	f.Seq, f.Prev = seq, string(rest[:64])
	var ok1, ok2, ok3 bool
	f.CallID, ok1 = plainString(rest[64:], `","call_id":"`)
	f.Replica, ok2 = lastString(data, `,"replica":"`)
	stamp, ok3 := lastString(data, `,"timestamp":"`)
	if !ok1 || !ok3 || (!ok2 && bytes.Contains(data, []byte(`"replica"`))) {
		return f, false
	}
	f.Timestamp, err = time.Parse(time.RFC3339Nano, stamp)
	return f, err == nil && f.CallID != ""
}

// plainString reads the string after prefix at the start of b, if it has
// no escapes.
func plainString(b []byte, prefix string) (string, bool) {
	b, ok := bytes.CutPrefix(b, []byte(prefix))
	if !ok {
		return "", false
	}
	end := bytes.IndexByte(b, '"')
	if end < 0 || bytes.IndexByte(b[:end], '\\') >= 0 {
		return "", false
	}
	return string(b[:end]), true
}

// lastString reads the string after the last name.
func lastString(data []byte, name string) (string, bool) {
	i := bytes.LastIndex(data, []byte(name))
	if i < 0 {
		return "", false
	}
	return plainString(data[i:], name)
}

// parseEntry reads what the chain needs of a record file. A file that is
// no JSON record is damaged: cut short, or edited; what its first bytes
// still say of its place is kept.
func parseEntry(file string, data []byte) *entry {
	e := &entry{file: file, hash: sha256.Sum256(data)}
	f, ok := fastChained(data)
	var err error
	if !ok {
		err = json.Unmarshal(data, &f)
		ok = err == nil && f.CallID != "" && bytes.HasSuffix(data, []byte("}\n"))
	}
	if ok {
		e.seq, e.chain, e.callID, e.when = f.Seq, f.Replica, f.CallID, f.Timestamp
		if h, err := parseHash(f.Prev); err == nil {
			e.prev, e.hasPrev = h, true
		}
		e.nameOK = nameMatches(file, f.CallID, f.Timestamp)
		return e
	}
	var syn *json.SyntaxError
	switch {
	case len(data) == 0, errors.As(err, &syn) && (strings.Contains(syn.Error(), "unexpected end") ||
		syn.Offset >= int64(len(data)) && !strings.Contains(syn.Error(), "after top-level value")):
		// The decoder stops at the end of the bytes: a file cut inside an
		// escape or a number reads as a bad character at its very end
		// (a whole record with a byte after it is edited, not cut).
		e.damage = KindTruncated
	case err == nil && !bytes.HasSuffix(data, []byte("\n")):
		e.damage = KindTruncated
	default:
		e.damage = KindEdited
	}
	e.seq, e.prev, e.hasPrev, e.chain = salvage(data)
	return e
}

// nameMatches reports whether file (DAY/NAME, with slashes) is the name
// FileName gives the record of call id started at t.
func nameMatches(file, id string, t time.Time) bool {
	t = t.UTC()
	if t.Year() < 0 || t.Year() > 9999 {
		return FileName(Record{CallID: id, Timestamp: t}) == filepath.FromSlash(file)
	}
	var buf [128]byte
	year, month, day := t.Date()
	b := appendDigits(buf[:0], year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, '/')
	b = appendStamp(b, t)
	b = append(b, '_')
	b = append(b, id...)
	b = append(b, ".json"...)
	return string(b) == file
}

// salvage reads the seq, prev and replica a damaged record still shows.
func salvage(data []byte) (seq uint64, prev [32]byte, hasPrev bool, chain string) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"seq":`))
	if !ok {
		return 0, prev, false, ""
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 {
		return 0, prev, false, ""
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return 0, prev, false, ""
	}
	if p, ok := bytes.CutPrefix(rest[i:], []byte(`,"prev":"`)); ok && len(p) >= 64 {
		if h, err := parseHash(string(p[:64])); err == nil {
			prev, hasPrev = h, true
		}
	}
	if j := bytes.Index(data, []byte(`,"replica":"`)); j >= 0 {
		r := data[j+len(`,"replica":"`):]
		if k := bytes.IndexByte(r, '"'); k >= 0 {
			chain = string(r[:k])
		}
	}
	return seq, prev, hasPrev, chain
}

// sortProblems puts problems in the order of their chains and places.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Chain != ps[j].Chain {
			return ps[i].Chain < ps[j].Chain
		}
		return ps[i].Seq < ps[j].Seq
	})
}

func hexHash(h [32]byte) string { return hex.EncodeToString(h[:]) }

// verifyWorkers is how many files Verify reads at once: more than the
// processors, since a read may wait on the disk or a lock of the file
// system (ext4's, for a folder of a day's records).
func verifyWorkers() int {
	if s := os.Getenv("AUDIT_VERIFY_WORKERS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 4 * runtime.GOMAXPROCS(0)
}
