// Package audit writes one JSON file per tool call under
// DIR/YYYY-MM-DD/, first as "pending" when the call starts, then replaced
// atomically by the final record, and deletes day folders past retention.
//
// The final record takes the pending one's place by exchanging the two
// files (renameat2 RENAME_EXCHANGE), not by renaming over it: the pending
// file moves to a side folder under DIR/.replaced/ and is deleted with that
// folder a day later, not one by one. Deleting a file per call is what made
// the log slow: on ext4 without a journal, every new file scans past each
// inode freed in the last minutes, so a log that frees one per call grows
// dearer the faster it is written (BenchmarkCall measures both ways).
package audit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/runes"
)

// Record is one call as the audit log keeps it.
type Record struct {
	CallID   string `json:"call_id"`
	ToolName string `json:"tool_name"`
	// Arguments is the model's arguments: a json.RawMessage when they were
	// valid JSON, else the raw text as a string.
	Arguments          any       `json:"arguments"`
	ArgumentsTruncated bool      `json:"arguments_truncated,omitempty"`
	SessionID          string    `json:"session_id"`
	Source             string    `json:"source,omitempty"`
	Timestamp          time.Time `json:"timestamp"` // when the call started, UTC
	Status             string    `json:"status"`    // pending, success, error
	DurationMS         int64     `json:"duration_ms"`
	Result             string    `json:"result"`
	ResultTruncated    bool      `json:"result_truncated"`
	ResultLength       int       `json:"result_length"` // characters in the full result
	ErrorCode          string    `json:"error_code,omitempty"`
}

// Options configure a Log.
type Options struct {
	Dir            string // the audit_logs folder
	MaxResultChars int    // results are cut to this many characters (default 2000)
	MaxArgChars    int    // string values in arguments are cut to this (default 4000)
	RetentionDays  int    // day folders older than this are deleted; <= 0 keeps all
	Now            func() time.Time
	Log            zerolog.Logger
}

// Log is the audit log. It is safe for concurrent use.
type Log struct {
	opts Options
	tag  string // names this process's side folders: <pid>-<random>
	mu   sync.Mutex
	days sync.Map // day folder name -> open descriptor (int)
}

// New creates the audit folder if needed and returns the log.
func New(opts Options) (*Log, error) {
	if opts.MaxResultChars <= 0 {
		opts.MaxResultChars = 2000
	}
	if opts.MaxArgChars <= 0 {
		opts.MaxArgChars = 4000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	spreadSubfolders(opts.Dir)
	if err := os.MkdirAll(filepath.Join(opts.Dir, replacedDir), 0o750); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	spreadSubfolders(filepath.Join(opts.Dir, replacedDir))
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return &Log{opts: opts, tag: fmt.Sprintf("%d-%x", os.Getpid(), rnd)}, nil
}

// spreadSubfolders marks dir as the top of a hierarchy (chattr +T), so that
// ext4 places each folder made in it in a block group picked by the
// folder's name rather than beside dir. New files take their inodes from
// their folder's group, and on ext4 without a journal each one scans past
// every inode freed there in the last minutes: next to /tmp, say, where
// compilers make and delete thousands of files, a new file cost 150-250 us
// here; in a group of its own 15-25 us. Other file systems refuse the flag,
// which changes nothing.
func spreadSubfolders(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	const topDir = 0x00020000 // FS_TOPDIR_FL in linux/fs.h
	if flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS); err == nil && flags&topDir == 0 {
		_ = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags|topDir)
	}
}

// Dir returns the folder the log writes under.
func (l *Log) Dir() string { return l.opts.Dir }

// FileName returns the path of a record's file relative to the audit folder:
// names sort by start time and carry the call ID.
func FileName(rec Record) string {
	t := rec.Timestamp.UTC()
	return filepath.Join(t.Format("2006-01-02"), t.Format("20060102T150405.000000000Z")+"_"+rec.CallID+".json")
}

// replacedDir, under the audit folder, holds the side folders: one per
// process and day, named YYYY-MM-DD.<pid>-<random>. Each record's file is
// made in one, then moved into its day folder, and the pending records
// that final records replace end up there. A day's side folders are
// deleted the day after.
//
// A file's inode comes from the block group of the folder it is made in.
// The side folder's name differs at every start, so ext4 places it (see
// spreadSubfolders) away from the groups where other programs, or an
// earlier run, deleted files that would slow every new file down.
const replacedDir = ".replaced"

// sideFolder names the side folder of day for this process.
func (l *Log) sideFolder(day string) string {
	return filepath.Join(replacedDir, day+"."+l.tag)
}

// Write stores rec, replacing any earlier record of the same call in one
// step, so a reader sees either the old or the new record, never a mix.
// The first record of a call (pending) appears whole by linking an
// unnamed file into place.
func (l *Log) Write(rec Record) error {
	rec.Timestamp = rec.Timestamp.UTC()
	rec.ResultLength = utf8.RuneCountInString(rec.Result)
	if rec.ResultLength > l.opts.MaxResultChars {
		rec.Result = runes.Prefix(rec.Result, l.opts.MaxResultChars)
		rec.ResultTruncated = true
	}
	rec.Arguments, rec.ArgumentsTruncated = l.cleanArguments(rec.Arguments)
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("audit: encode %s: %w", rec.CallID, err)
	}
	data = append(data, '\n')

	rel := FileName(rec)
	day, name := filepath.Dir(rel), filepath.Base(rel)
	dir, err := l.dir(day)
	if err != nil {
		return err
	}
	side, err := l.dir(l.sideFolder(day))
	if err != nil {
		return err
	}
	if rec.Status == "pending" {
		if err := place(side, dir, name, data); err == nil {
			return nil
		}
		// No O_TMPFILE here (some file systems lack it), or a record of
		// this call exists already: replace it instead.
	}
	if err = exchange(side, dir, name, data); err != nil {
		// No RENAME_EXCHANGE here (some file systems lack it): rename
		// over the earlier record.
		err = replace(dir, name, data)
	}
	if err != nil {
		return fmt.Errorf("audit: %s: %w", rel, err)
	}
	return nil
}

// dir returns an open descriptor of a day folder, creating the folder the
// first time. Descriptors stay open: files are created relative to them,
// which spares a path walk per write.
func (l *Log) dir(day string) (int, error) {
	if fd, ok := l.days.Load(day); ok {
		return fd.(int), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if fd, ok := l.days.Load(day); ok {
		return fd.(int), nil
	}
	path := filepath.Join(l.opts.Dir, day)
	if err := os.MkdirAll(path, 0o750); err != nil {
		return -1, fmt.Errorf("audit: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("audit: open %s: %w", path, err)
	}
	l.days.Store(day, fd)
	return fd, nil
}

// place makes name appear in dir with data, whole, by writing an unnamed
// file made in side and linking it in. It fails if name exists.
func place(side, dir int, name string, data []byte) error {
	fd, err := unix.Openat(side, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := writeAll(fd, data); err != nil {
		return err
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dir, name, unix.AT_SYMLINK_FOLLOW)
}

// exchange writes data as name in side, then swaps it with name in dir in
// one step: the new record takes its place in dir and the earlier one moves
// to side, so no inode is freed. With no earlier record, it is moved in.
// Nobody reads side, so the file is written there under its name.
func exchange(side, dir int, name string, data []byte) error {
	const create = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC
	fd, err := unix.Openat(side, name, create, 0o640)
	if err == unix.EEXIST { // an earlier record of this call was replaced already
		if err = unix.Unlinkat(side, name, 0); err == nil {
			fd, err = unix.Openat(side, name, create, 0o640)
		}
	}
	if err != nil {
		return err
	}
	err = writeAll(fd, data)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat2(side, name, dir, name, unix.RENAME_EXCHANGE)
		if err == unix.ENOENT {
			err = unix.Renameat2(side, name, dir, name, unix.RENAME_NOREPLACE)
		}
	}
	if err != nil {
		_ = unix.Unlinkat(side, name, 0)
	}
	return err
}

// replace writes data to a temporary file in dir and renames it over name.
// Plain system calls rather than os.File: a regular file gains nothing from
// the runtime poller, and skipping it saves five calls per write.
func replace(dir int, name string, data []byte) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + name + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return err
	}
	werr := writeAll(fd, data)
	if cerr := unix.Close(fd); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(dir, tmp, dir, name)
	}
	if werr != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
	}
	return werr
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// cleanArguments cuts long string values and blanks values of secret-looking
// keys. Small arguments without such keys pass through untouched.
func (l *Log) cleanArguments(args any) (any, bool) {
	raw, ok := args.(json.RawMessage)
	if !ok {
		s, _ := args.(string)
		if utf8.RuneCountInString(s) > l.opts.MaxArgChars {
			return runes.Prefix(s, l.opts.MaxArgChars), true
		}
		return s, false
	}
	if len(raw) <= l.opts.MaxArgChars && !redact.MentionsSecretName(raw) {
		return raw, false
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return string(raw), false
	}
	cut := false
	v = l.clean(v, &cut)
	out, err := json.Marshal(v)
	if err != nil {
		return string(raw), cut
	}
	return json.RawMessage(out), cut
}

func (l *Log) clean(v any, cut *bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if redact.SecretName(k) {
				t[k] = "[REDACTED]"
				continue
			}
			t[k] = l.clean(val, cut)
		}
	case []any:
		for i := range t {
			t[i] = l.clean(t[i], cut)
		}
	case string:
		if utf8.RuneCountInString(t) > l.opts.MaxArgChars {
			*cut = true
			return runes.Prefix(t, l.opts.MaxArgChars)
		}
	}
	return v
}

// Prune deletes day folders older than the retention period and returns how
// many it deleted. Replaced records are kept for a day whatever the
// retention: they are of no use once their calls have ended.
func (l *Log) Prune() (int, error) {
	now := l.opts.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if _, err := l.pruneDays(replacedDir, today.AddDate(0, 0, -1)); err != nil {
		return 0, err
	}
	if l.opts.RetentionDays <= 0 {
		return 0, nil
	}
	return l.pruneDays(".", today.AddDate(0, 0, -l.opts.RetentionDays))
}

// pruneDays deletes the day folders in sub (relative to the audit folder)
// dated before cutoff and returns how many it deleted.
func (l *Log) pruneDays(sub string, cutoff time.Time) (int, error) {
	parent := filepath.Join(l.opts.Dir, sub)
	entries, err := os.ReadDir(parent)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("audit: prune: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		day, err := time.Parse("2006-01-02", strings.SplitN(name, ".", 2)[0])
		if err != nil || !day.Before(cutoff) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(parent, name)); err != nil {
			return n, fmt.Errorf("audit: prune: %w", err)
		}
		if fd, ok := l.days.LoadAndDelete(filepath.Join(sub, name)); ok {
			unix.Close(fd.(int))
		}
		n++
	}
	return n, nil
}

// RunRetention prunes now and then every interval until ctx is done.
func (l *Log) RunRetention(ctx context.Context, interval time.Duration) {
	prune := func() {
		if n, err := l.Prune(); err != nil {
			l.opts.Log.Error().Err(err).Msg("audit retention")
		} else if n > 0 {
			l.opts.Log.Info().Int("days_deleted", n).Msg("audit retention")
		}
	}
	prune()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			prune()
		}
	}
}

// Close releases the folders' descriptors.
func (l *Log) Close() error {
	l.days.Range(func(k, fd any) bool {
		unix.Close(fd.(int))
		l.days.Delete(k)
		return true
	})
	return nil
}
