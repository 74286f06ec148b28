// Package memory keeps an agent's long-term memory in one human-readable
// file, workspace/memory/MEMORY.md, compatible with CountBot: one entry per
// line, "YYYY-MM-DD|source|content".
//
// Writers append one whole line with a single O_APPEND write and fsync,
// serialised within the process by a semaphore and across processes by an
// flock on memory/.MEMORY.md.lock, so concurrent writers never lose or tear
// an entry. Readers take no lock: they parse the file once and keep the
// parsed form while the file only grows, reading just the new bytes.
package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Where the memory lives, relative to the workspace.
const (
	Dir      = "memory"
	File     = "MEMORY.md"
	Path     = Dir + "/" + File
	LockFile = ".MEMORY.md.lock"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 64 << 20
	DefaultLockWait = 10 * time.Second
)

// ErrEmpty is returned by Write for content that is empty once folded.
var ErrEmpty = errors.New("memory: empty content")

// ErrBusy is returned by Write when the file lock stays held by another
// writer for longer than Options.LockWait.
var ErrBusy = errors.New("memory: the memory file is locked by another writer")

// TooLargeError is returned when the memory file is larger than the store
// is willing to hold in memory.
type TooLargeError struct{ Size, Max int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("memory: %s is %d bytes, more than the %d the store loads", Path, e.Size, e.Max)
}

// NotRegularError is returned when memory/MEMORY.md is a folder, a pipe or
// a device rather than a file.
type NotRegularError struct{}

func (NotRegularError) Error() string { return "memory: " + Path + " is not a regular file" }

// Options configure a Store. Zero values get the defaults.
type Options struct {
	// Root, when set, returns the workspace as it is now; it is asked at
	// every call, so a workspace folder replaced on the host is followed
	// and a missing one reported (its error is returned as is). Without
	// it, the root given to New is used.
	Root     func() (*os.Root, error)
	Now      func() time.Time // the date written into entries; default time.Now
	MaxBytes int64            // largest file loaded for search and read
	LockWait time.Duration    // how long Write waits for another process's lock
}

// Store is the memory file of one workspace. It is safe for concurrent use,
// and several processes may use the same file at once.
type Store struct {
	root *os.Root
	opts Options
	sem  chan struct{} // serialises this process's writers; a channel so waiting honours ctx

	// write writes a line to the file; tests replace it to cut writes short.
	write func(f *os.File, b []byte) (int, error)

	mu  sync.Mutex // guards idx
	idx index
}

// New returns the store of the workspace root. The memory folder and file
// are created by the first Write.
func New(root *os.Root, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.LockWait <= 0 {
		opts.LockWait = DefaultLockWait
	}
	if opts.Root == nil {
		opts.Root = func() (*os.Root, error) { return root, nil }
	}
	return &Store{root: root, opts: opts, sem: make(chan struct{}, 1), write: (*os.File).Write}
}

// Written describes an entry Write saved.
type Written struct {
	Text string // the line written
	// Line is the entry's line number, Entry its number among the file's
	// non-blank lines, and Total the number of non-blank lines after the
	// write. All three are 0 when the file is too large to count.
	Line, Entry, Total int
}

// Write appends an entry for content from source (the channel; "web" when
// empty), dated today. The line reaches the disk before Write returns.
// It is all or nothing: when the write or the sync fails (a full disk), the
// file is cut back to its length before the write, still under the lock,
// and the error returned; no part of the entry stays in the file.
func (s *Store) Write(ctx context.Context, source, content string) (Written, error) {
	if FoldContent(content) == "" {
		return Written{}, ErrEmpty
	}
	text := FormatEntry(s.opts.Now(), source, content)
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return Written{}, ctx.Err()
	}
	root, err := s.opts.Root()
	if err != nil {
		return Written{}, err
	}
	if err := root.MkdirAll(Dir, 0o755); err != nil {
		return Written{}, err
	}
	unlock, err := s.lock(ctx, root)
	if err != nil {
		return Written{}, err
	}
	defer unlock()

	off, err := s.appendLine(root, text)
	if err != nil {
		return Written{}, err
	}
	if off == 0 {
		// The file may be new: make its name as durable as its content.
		if d, err := root.Open(Dir); err == nil {
			_ = d.Sync()
			d.Close()
		}
	}
	w := Written{Text: text}
	// Still under the lock, so no other cooperating writer has added a line
	// after ours: the counts are those right after the write.
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.refresh(root)
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			return w, nil
		}
		return w, err
	}
	if f != nil {
		f.Close()
	}
	w.Total = s.idx.stats().Entries
	w.Line, w.Entry = s.idx.lineAt(off)
	return w, nil
}

// appendLine appends text and a line break in one write and syncs it. It
// returns the offset the line starts at. A file whose last line has no line
// break (edited by hand) gets one first, so the entry stays on its own line.
func (s *Store) appendLine(root *os.Root, text string) (int64, error) {
	f, err := root.OpenFile(Path, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, NotRegularError{}
	}
	buf := make([]byte, 0, len(text)+2)
	off := fi.Size()
	if off > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], off-1); err != nil {
			return 0, err
		}
		if last[0] != '\n' {
			buf = append(buf, '\n')
			off++
		}
	}
	buf = append(buf, text...)
	buf = append(buf, '\n')
	// One write of the whole line: with O_APPEND the kernel places it at
	// the end as a unit, so even a writer that ignores the lock cannot
	// interleave inside it.
	n, err := s.write(f, buf)
	if err == nil && n != len(buf) {
		err = fmt.Errorf("memory: short write (%d of %d bytes)", n, len(buf))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		// Cut back what reached the file, so no torn entry stays. Cooperating
		// writers wait for the lock, so the file ended at fi.Size() before
		// this write.
		if terr := f.Truncate(fi.Size()); terr != nil {
			return 0, fmt.Errorf("%w; cutting the file back to %d bytes failed too: %v", err, fi.Size(), terr)
		}
		_ = f.Sync()
		return 0, err
	}
	return off, f.Close()
}

// refresh brings the index up to date with the file and returns the file,
// open, to read the lines a result shows; nil when there is no file. The
// caller closes it. s.mu must be held.
func (s *Store) refresh(root *os.Root) (*os.File, error) {
	f, err := root.OpenFile(Path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		s.idx.reset()
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		s.idx.reset()
		err = NotRegularError{}
	}
	if err == nil {
		err = s.idx.refresh(f, fi, s.opts.MaxBytes)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// load takes s.mu and refreshes the index for a reader. The caller calls
// done when finished with the index and the file.
func (s *Store) load() (f *os.File, done func(), err error) {
	root, err := s.opts.Root()
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	f, err = s.refresh(root)
	if err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	return f, func() {
		if f != nil {
			f.Close()
		}
		s.mu.Unlock()
	}, nil
}

// Stats describes the memory file.
type Stats struct {
	Exists    bool
	Lines     int    // lines in the file
	Entries   int    // non-blank lines
	First     string // earliest entry date, "" when there is none
	Last      string // latest entry date
	Malformed []int  // numbers of non-blank lines not in the YYYY-MM-DD|source|content form
	Blank     []int  // numbers of blank lines
	// Unterminated is the length in bytes of a last line without a line
	// break, which is not counted among the lines: a write cut short (a
	// full disk, a crash) or a hand edit in progress. 0 when there is none.
	Unterminated int
}

// SearchResult is what Search found.
type SearchResult struct {
	Hits  []Line // newest (last in the file) first
	Total int    // matching lines, of which Hits are the newest
	Stats Stats
}

// Search returns the lines holding any of keywords (or, with all, every
// one), compared case-insensitively as substrings, so it works for text
// without spaces between words such as Chinese. At most limit hits are
// returned, newest first, with the total number of matches.
func (s *Store) Search(ctx context.Context, keywords []string, all bool, limit int) (SearchResult, error) {
	kws := make([]string, 0, len(keywords))
	seen := make(map[string]bool)
	for _, k := range keywords {
		if k = foldString(k); k != "" && !seen[k] {
			seen[k] = true
			kws = append(kws, k)
		}
	}
	f, done, err := s.load()
	if err != nil {
		return SearchResult{}, err
	}
	defer done()
	res := SearchResult{Stats: s.idx.stats()}
	if len(kws) == 0 || limit <= 0 {
		return res, nil
	}
	hits, total := s.idx.search(kws, all, limit)
	res.Total = total
	for _, i := range hits {
		res.Hits = append(res.Hits, s.idx.line(f, i))
	}
	return res, ctx.Err()
}

// RangeMaxBytes bounds the text of the lines one Range returns.
const RangeMaxBytes = 1 << 20

// Range returns lines start to end (1-based, inclusive; end is clipped to
// the file), blank ones included so the numbers match the file. It stops
// early once the lines hold RangeMaxBytes of text.
func (s *Store) Range(ctx context.Context, start, end int) ([]Line, Stats, error) {
	f, done, err := s.load()
	if err != nil {
		return nil, Stats{}, err
	}
	defer done()
	st := s.idx.stats()
	end = min(end, st.Lines)
	var out []Line
	for n, size := max(start, 1), 0; n <= end && size < RangeMaxBytes; n++ {
		l := s.idx.line(f, n-1)
		size += len(l.Text)
		out = append(out, l)
	}
	return out, st, ctx.Err()
}

// Recent returns the last n non-blank lines, oldest first.
func (s *Store) Recent(ctx context.Context, n int) ([]Line, Stats, error) {
	f, done, err := s.load()
	if err != nil {
		return nil, Stats{}, err
	}
	defer done()
	st := s.idx.stats()
	var out []Line
	for i := st.Lines - 1; i >= 0 && len(out) < n; i-- {
		if !s.idx.blankAt(i) {
			out = append(out, s.idx.line(f, i))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, st, ctx.Err()
}

// lineAt returns the line number of the line starting at byte off, and its
// number among the non-blank lines; 0, 0 when no line starts there (the
// file was replaced meanwhile).
func (x *index) lineAt(off int64) (line, entry int) {
	n := x.lines()
	i, found := slices.BinarySearch(x.starts, uint32(off))
	if !found || off > int64(^uint32(0)) {
		return 0, 0
	}
	entry = x.entries
	for j := n - 1; j > i; j-- {
		if !x.blankAt(j) {
			entry--
		}
	}
	return i + 1, entry
}
