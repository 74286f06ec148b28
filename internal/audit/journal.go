package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// journalDir, under the audit folder, holds the journal segments:
// <pid>-<process start>-<seq>.jsonl, one JSON record per line. Each process
// holds an exclusive lock (flock) on each of its segments for as long as it
// has them open, so a segment nobody can lock belongs to a live process,
// and one that can be locked was left by a dead one, whatever its pid says
// (pids are reused, and in a container every start is pid 1).
//
// A line is either a call's start (status "started"), written before the
// tool runs, or, rarely, the final record of a call whose file could not
// be written.
const journalDir = ".journal"

// linkCheckEvery is how often Start makes sure the current segment still
// has a name (someone may have deleted the folder): lines written to a
// deleted file would be lost with the process.
const linkCheckEvery = time.Second

// segment is one journal file this process writes. Lines are appended
// without a lock: each is one write(2) on an O_APPEND descriptor, which
// the kernel does not interleave with another.
type segment struct {
	log  *Log
	path string
	f    *os.File
	day  string
	size atomic.Int64 // bytes of the lines written or being written
	// open counts the calls noted here whose final record is not written
	// yet, and the Starts about to write a line.
	open    atomic.Int64
	retired atomic.Bool // no new lines: delete once open drops to zero
	keep    atomic.Bool // holds a final record that could not be written: reconcile at the next start
	once    sync.Once
}

// release ends one call (or one Start that wrote nothing) of the segment.
func (s *segment) release() {
	if s.open.Add(-1) == 0 && s.retired.Load() {
		s.end(true)
	}
}

// retire stops new lines; the segment goes once its open calls end.
func (s *segment) retire() {
	s.retired.Store(true)
	if s.open.Load() == 0 {
		s.end(true)
	}
}

// end closes the segment, releasing its lock, once. It deletes the file
// when asked to and nothing in it is left to reconcile.
func (s *segment) end(remove bool) {
	s.once.Do(func() {
		s.f.Close()
		if remove && !s.keep.Load() && s.open.Load() == 0 {
			os.Remove(s.path)
		}
		s.log.segs.Delete(s)
	})
}

// append writes line to the current segment of day, starting a new
// segment on a new day, when the current one is full, or when it has
// lost its name. The segment returned counts the call as open.
func (l *Log) append(day string, line []byte) (*segment, error) {
	n := int64(len(line))
	for range 8 {
		seg := l.cur.Load()
		if seg == nil || seg.day != day || !l.stillLinked(seg) {
			var err error
			if seg, err = l.next(day, seg); err != nil {
				return nil, err
			}
		}
		seg.open.Add(1)
		if seg.retired.Load() { // retired since we loaded it
			seg.release()
			continue
		}
		if end := seg.size.Add(n); end > l.opts.JournalMaxBytes && end > n {
			seg.release()
			if _, err := l.next(day, seg); err != nil {
				return nil, err
			}
			continue
		}
		err := l.fault("journal")
		if err == nil {
			_, err = seg.f.Write(line)
		}
		if err != nil {
			// A failed write may leave part of a line: later lines go to
			// a new segment.
			l.cur.CompareAndSwap(seg, nil)
			seg.retire()
			seg.release()
			return nil, err
		}
		return seg, nil
	}
	return nil, errors.New("no journal segment would take the line")
}

// stillLinked checks, at most once every linkCheckEvery, that seg's file
// is still in its folder: lines written to a deleted file would vanish
// with the process.
func (l *Log) stillLinked(seg *segment) bool {
	now := time.Now().UnixNano()
	last := l.checked.Load()
	if now-last < int64(linkCheckEvery) || !l.checked.CompareAndSwap(last, now) {
		return true
	}
	if linked(seg) {
		return true
	}
	l.opts.Log.Error().Str("journal", seg.path).Msg("audit: the journal segment was deleted; starting a new one")
	return false
}

// next retires old, if it is still the current segment, and returns the
// current one, starting it if needed.
func (l *Log) next(day string, old *segment) (*segment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	cur := l.cur.Load()
	if cur != nil && cur != old && cur.day == day && !cur.retired.Load() {
		return cur, nil // another Start has just started it
	}
	if cur != nil {
		l.cur.Store(nil)
		cur.retire()
	}
	if err := os.MkdirAll(l.journal, 0o750); err != nil {
		return nil, err
	}
	for range 3 {
		l.seq++
		path := filepath.Join(l.journal, fmt.Sprintf("%s-%d.jsonl", l.tag, l.seq))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
		if err != nil {
			return nil, err
		}
		if err := lockFile(f, true); err != nil {
			f.Close()
			os.Remove(path)
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		seg := &segment{log: l, path: path, f: f, day: day}
		// Between the create and the lock, another process reconciling
		// may have found the file unlocked, empty, and deleted it.
		if !linked(seg) {
			f.Close()
			continue
		}
		l.segs.Store(seg, struct{}{})
		l.checked.Store(time.Now().UnixNano())
		l.cur.Store(seg)
		return seg, nil
	}
	return nil, errors.New("the journal segment kept disappearing")
}

// linked reports whether seg's file is still in its folder under its name.
func linked(seg *segment) bool {
	a, err := seg.f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(seg.path)
	return err == nil && os.SameFile(a, b)
}

// journalLine is a Record as read back from the journal: the arguments
// come back as they were written, JSON or a string.
type journalLine struct {
	Record
	Arguments json.RawMessage `json:"arguments"`
}

func parseLine(line []byte) (Record, bool) {
	// A write cut short by a full disk leaves part of a line, and the next
	// line may follow it on the same line: records start with their call
	// ID, so the last record start is where a whole one begins.
	if i := bytes.LastIndex(line, []byte(`{"call_id":`)); i > 0 {
		line = line[i:]
	}
	var jl journalLine
	if json.Unmarshal(line, &jl) != nil || jl.CallID == "" {
		return Record{}, false
	}
	rec := jl.Record
	var s string
	if json.Unmarshal(jl.Arguments, &s) == nil {
		rec.Arguments = s
	} else if len(jl.Arguments) > 0 {
		rec.Arguments = jl.Arguments
	}
	return rec, true
}

// Reconcile finishes the calls of dead processes: for each journal segment
// no live process holds, every call started without a final record gets
// one (the record the process could not write, kept in the journal, or
// else one with status interrupted), and then the segment is deleted. It
// returns how many calls it marked interrupted.
func (l *Log) Reconcile() (int, error) {
	entries, err := os.ReadDir(l.journal)
	if err != nil {
		return 0, fmt.Errorf("audit: reconcile: %w", err)
	}
	total := 0
	var errs []error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") || strings.HasPrefix(e.Name(), l.tag+"-") {
			continue
		}
		n, err := l.reconcileSegment(filepath.Join(l.journal, e.Name()))
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("audit: reconcile %s: %w", e.Name(), err))
		}
	}
	return total, errors.Join(errs...)
}

func (l *Log) reconcileSegment(path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // another process reconciled it
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := lockFile(f, false); err != nil {
		if errors.Is(err, errLocked) {
			return 0, nil // its process is alive
		}
		return 0, err
	}
	if !linked(&segment{path: path, f: f}) {
		return 0, nil // another process reconciled it while we waited
	}
	starts, finals, err := readSegment(f)
	if err != nil {
		return 0, err
	}
	// The records go to the chain of the replica that ran the calls,
	// whose end this process also seals with a digest when that replica
	// is another (it died). One that is alive again reconciles its own.
	var c *chain
	if len(starts) > 0 {
		replica := starts[0].Replica
		if replica == "" {
			replica = l.opts.Replica
		}
		var release bool
		c, release, err = l.chainFor(replica)
		if errors.Is(err, errChainBusy) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if release {
			defer l.finishDeadChain(c)
		}
	}
	interrupted := 0
	for _, start := range starts {
		if l.files.exists(FileName(start)) {
			continue
		}
		rec, ok := finals[start.CallID]
		if !ok {
			rec = start
			rec.Status, rec.ErrorCode = StatusInterrupted, CodeInterrupted
			rec.Result = "Error: the service stopped before this call finished (it crashed or was killed), so its outcome is unknown. Next: check whether the call's effects happened before repeating it."
			interrupted++
		}
		if err := l.sealReconciled(c, rec); err != nil {
			return interrupted, err
		}
	}
	if interrupted > 0 {
		l.opts.Log.Warn().Str("journal", filepath.Base(path)).Int("interrupted", interrupted).
			Msg("audit: calls of a dead process recorded as interrupted")
	}
	return interrupted, os.Remove(path)
}

// readSegment returns the calls started in a segment, in order, and the
// final records it holds by call ID. A line that does not parse (the last
// write of a process that ran out of space) is skipped: its call was
// refused, never run.
func readSegment(r io.Reader) ([]Record, map[string]Record, error) {
	var starts []Record
	finals := map[string]Record{}
	seen := map[string]bool{}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if rec, ok := parseLine(line); ok {
				if rec.Status == StatusStarted {
					if !seen[rec.CallID] {
						seen[rec.CallID] = true
						starts = append(starts, rec)
					}
				} else {
					finals[rec.CallID] = rec
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	sort.SliceStable(starts, func(i, j int) bool { return starts[i].Timestamp.Before(starts[j].Timestamp) })
	return starts, finals, nil
}
