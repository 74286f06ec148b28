package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// segment is one journal file this process writes.
type segment struct {
	path string
	f    *os.File
	day  string
	size int64
	open int  // calls noted here whose final record is not written yet
	keep bool // holds a final record that could not be written: reconcile at the next start
	gone bool // closed
}

func (s *segment) append(line []byte) error {
	n, err := s.f.Write(line) // O_APPEND: one write(2), at the end
	s.size += int64(n)
	return err
}

// close releases the lock and leaves the file for reconciliation.
func (s *segment) close() {
	if !s.gone {
		s.gone = true
		s.f.Close()
	}
}

// remove deletes the segment: every call it noted has its final record.
func (s *segment) remove() {
	if !s.gone {
		s.close()
		os.Remove(s.path)
	}
}

// segmentFor returns the segment a start line of n bytes on day goes to,
// starting a new one on a new day, when the current one is full, or when
// it has lost its name. l.mu must be held.
func (l *Log) segmentFor(day string, n int64) (*segment, error) {
	if l.closed {
		return nil, errClosed
	}
	if seg := l.cur; seg != nil {
		now := time.Now()
		if now.Sub(l.checked) >= linkCheckEvery {
			l.checked = now
			if !linked(seg) {
				l.opts.Log.Error().Str("journal", seg.path).Msg("audit: the journal segment was deleted; starting a new one")
				l.retire(seg)
			}
		}
	}
	if seg := l.cur; seg != nil && seg.day == day && (seg.size == 0 || seg.size+n <= l.opts.JournalMaxBytes) {
		return seg, nil
	}
	if l.cur != nil {
		l.retire(l.cur)
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
		seg := &segment{path: path, f: f, day: day}
		// Between the create and the lock, another process reconciling
		// may have found the file unlocked, empty, and deleted it.
		if !linked(seg) {
			f.Close()
			continue
		}
		l.cur, l.checked = seg, time.Now()
		l.segs[seg] = struct{}{}
		return seg, nil
	}
	return nil, errors.New("the journal segment kept disappearing")
}

// retire stops writing to seg; it is deleted as soon as its last call is
// final. l.mu must be held.
func (l *Log) retire(seg *segment) {
	if l.cur == seg {
		l.cur = nil
	}
	if seg.open == 0 && !seg.keep {
		seg.remove()
		delete(l.segs, seg)
	}
}

// journalLine is a Record as read back from the journal: the arguments
// come back as they were written, JSON or a string.
type journalLine struct {
	Record
	Arguments json.RawMessage `json:"arguments"`
}

func parseLine(line []byte) (Record, bool) {
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

// linked reports whether seg's file is still in its folder under its name.
func linked(seg *segment) bool {
	a, err := seg.f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(seg.path)
	return err == nil && os.SameFile(a, b)
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
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") || strings.HasPrefix(e.Name(), l.tag+"-") {
			continue
		}
		n, err := l.reconcileSegment(filepath.Join(l.journal, e.Name()))
		total += n
		if err != nil {
			return total, fmt.Errorf("audit: reconcile %s: %w", e.Name(), err)
		}
	}
	return total, nil
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
	interrupted := 0
	for _, start := range starts {
		name := FileName(start)
		if l.files.exists(name) {
			continue
		}
		rec, ok := finals[start.CallID]
		if !ok {
			rec = start
			rec.Status, rec.ErrorCode = StatusInterrupted, CodeInterrupted
			rec.Result = "Error: the service stopped before this call finished (it crashed or was killed), so its outcome is unknown. Next: check whether the call's effects happened before repeating it."
			interrupted++
		}
		rec.ResultLength = 0 // prepare counts the stored result again
		data, err := json.Marshal(l.prepare(rec))
		if err != nil {
			return interrupted, err
		}
		if err := l.files.place(name, append(data, '\n'), true); err != nil {
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
