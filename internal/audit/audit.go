// Package audit keeps the record of every tool call: one JSON file per
// call under DIR/YYYY-MM-DD/, written once when the call ends, and a
// per-process journal that notes each call before its tool runs, so a call
// the process never finished (a crash, SIGKILL, the OOM killer) is still
// recorded, as interrupted, when the service starts again.
//
// Per call the log costs one write(2) on the journal, appended to an open
// descriptor, and one new file that appears whole in its day folder (an
// unnamed file linked into place). Nothing is renamed over or deleted per
// call: the journal's segments are deleted whole once every call they
// noted is final.
package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/runes"
)

// Status values of a Record besides the registry's success and error.
const (
	// StatusStarted marks a journal line written before the tool runs;
	// no file in a day folder ever has it.
	StatusStarted = "started"
	// StatusInterrupted is the final record of a call its process never
	// finished, written by the reconciliation at the next start.
	StatusInterrupted = "interrupted"
	// CodeInterrupted is the error code of an interrupted call.
	CodeInterrupted = "interrupted"
)

// Record is one call as the audit log keeps it.
type Record struct {
	// Seq is the record's place in its replica's chain, 1, 2, ... in the
	// order records were finished; Prev is the SHA-256, in hex, of the
	// bytes of the chain's record before it (chain.go). The log sets both
	// when it writes a final record; journal lines have neither.
	Seq      uint64 `json:"seq,omitempty"`
	Prev     string `json:"prev,omitempty"`
	CallID   string `json:"call_id"`
	ToolName string `json:"tool_name"`
	// Arguments is the model's arguments: a json.RawMessage when they were
	// valid JSON, else the raw text as a string.
	Arguments          any  `json:"arguments"`
	ArgumentsTruncated bool `json:"arguments_truncated,omitempty"`
	// Facts are the call's facts as the gate read them (session_id,
	// source, key, channel, chat_id, reply_to, request_id, trace_id),
	// held as they are: a fact added there is recorded here.
	callinfo.Facts
	// Replica names the toolsvc process that ran the call
	// (TOOLSVC_REPLICA_ID), so records of several replicas sharing one
	// log shipper or volume can be told apart.
	Replica         string    `json:"replica,omitempty"`
	Timestamp       time.Time `json:"timestamp"` // when the call started, UTC
	Status          string    `json:"status"`    // success, error, interrupted
	DurationMS      int64     `json:"duration_ms"`
	Result          string    `json:"result"`
	ResultTruncated bool      `json:"result_truncated"`
	ResultLength    int       `json:"result_length"` // characters in the full result
	ErrorCode       string    `json:"error_code,omitempty"`
	// Decision is the key policy's, for a call it refused before it ran:
	// "denied" (a tool the key may not call; answered as an unknown tool)
	// or "rate_limited" (over the key's rate or its calls at once).
	// Absent for every call that ran.
	Decision string `json:"decision,omitempty"`
	// Approval is what became of the approval the call needed, when it
	// needed one.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is what a record says of the approval its call needed.
type Approval struct {
	ID string `json:"id"`
	// Outcome is "held" (the call waits for a person), "approved" (it ran
	// under the approval), "rejected", "expired" (nobody decided in
	// time), "decided" (the record of a decision itself), or "refused"
	// (the approval presented did not fit the call: see the record's
	// error).
	Outcome         string     `json:"outcome"`
	ArgumentsSHA256 string     `json:"arguments_sha256,omitempty"`
	DecidedBy       string     `json:"decided_by,omitempty"`
	DecidedAt       *time.Time `json:"decided_at,omitempty"`
	Reason          string     `json:"reason,omitempty"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
}

// Options configure a Log.
type Options struct {
	Dir            string // the audit_logs folder
	MaxResultChars int    // results are cut to this many characters (default 2000)
	MaxArgChars    int    // string values in arguments are cut to this (default 4000)
	RetentionDays  int    // day folders older than this are deleted; <= 0 keeps all
	// JournalMaxBytes starts a new journal segment when the current one
	// would grow past it (default 4 MiB). A new day starts one too.
	JournalMaxBytes int64
	// Replica is written into every record (Record.Replica).
	Replica string
	// Stdout, when set, also receives each final record as one JSON line,
	// for log shippers that read a container's output.
	Stdout io.Writer
	// RetentionInterval, when set, runs a round of reconciliation and
	// retention (RunRetention) now and then every interval, in the
	// background, until Close.
	RetentionInterval time.Duration
	// SigningKeyFile names the Ed25519 private key (PKCS#8 PEM) the
	// chain's digests are signed with; empty: they are written unsigned.
	SigningKeyFile string
	// DigestInterval is how often a digest of the chain is written, when
	// records were added since the last (default a minute); negative:
	// only after retention deletes and at Close.
	DigestInterval time.Duration
	Now            func() time.Time
	Log            zerolog.Logger
}

// Stats counts the faults of a Log since it was made.
type Stats struct {
	StartFaults  int64 // start lines that could not be written
	RecordFaults int64 // final records that could not be written
}

// Log is the audit log. It is safe for concurrent use.
type Log struct {
	opts    Options
	journal string // DIR/.journal
	tag     string // <pid>-<start time>: names this process's segments
	files   *files // the day folders and how records are placed in them

	// Start takes no lock unless it has to start a new segment: cur is
	// the segment lines go to, and each segment counts its own calls.
	cur     atomic.Pointer[segment]
	checked atomic.Int64 // when cur was last checked to still have its name, Unix ns
	mu      sync.Mutex   // serialises starting segments and Close
	seq     int
	segs    sync.Map // every open segment: cur, and retired ones with calls still open
	closed  bool

	startFaults, recordFaults atomic.Int64
	stdoutMu                  sync.Mutex // one record line at a time on Options.Stdout

	days dayNames  // the day folder of the calls of the current day
	bufs sync.Pool // *[]byte final records are encoded in

	// inject, set by tests, fails the named write ("journal", "record")
	// with the error it returns.
	inject func(op string) error

	// stopRetention ends the rounds of Options.RetentionInterval, and
	// retention waits for the last one.
	stopRetention context.CancelFunc
	retention     sync.WaitGroup

	chain       *chain             // this replica's chain
	key         ed25519.PrivateKey // signs digests; nil: unsigned
	stopDigests context.CancelFunc
	digests     sync.WaitGroup
}

// Started is what Start hands back for Finish: the journal segment that
// noted the call, and the arguments as recorded.
type Started struct {
	seg  *segment
	args any
	cut  bool
}

// New creates the audit folder if needed, reconciles the journals of
// processes that have died (every call they started without a final
// record gets one with status interrupted), opens this process's journal
// and returns the log.
func New(opts Options) (*Log, error) {
	if opts.MaxResultChars <= 0 {
		opts.MaxResultChars = 2000
	}
	if opts.MaxArgChars <= 0 {
		opts.MaxArgChars = 4000
	}
	if opts.JournalMaxBytes <= 0 {
		opts.JournalMaxBytes = 4 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Log{
		opts:    opts,
		journal: filepath.Join(opts.Dir, journalDir),
		tag:     fmt.Sprintf("%d-%s", os.Getpid(), time.Now().UTC().Format("20060102T150405.000000000Z")),
		files:   newFiles(opts.Dir),
	}
	if err := os.MkdirAll(l.journal, 0o750); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := l.openOwnChain(); err != nil {
		l.files.close()
		return nil, err
	}
	// A journal that cannot be reconciled now (a full disk, say) stays for
	// the next round; it must not keep the service from starting.
	if _, err := l.Reconcile(); err != nil {
		opts.Log.Error().Err(err).Msg("audit reconciliation")
	}
	if _, err := l.next(dayOf(opts.Now()), nil); err != nil {
		l.chain.close()
		l.files.close()
		return nil, fmt.Errorf("audit: journal: %w", err)
	}
	l.startDigests()
	if opts.RetentionInterval > 0 {
		ctx, stop := context.WithCancel(context.Background())
		l.stopRetention = stop
		l.retention.Go(func() { l.RunRetention(ctx, opts.RetentionInterval) })
	}
	return l, nil
}

// Dir returns the folder the log writes under.
func (l *Log) Dir() string { return l.opts.Dir }

// Stats returns the faults counted so far.
func (l *Log) Stats() Stats {
	return Stats{StartFaults: l.startFaults.Load(), RecordFaults: l.recordFaults.Load()}
}

// Start notes in the journal that the call rec describes is about to run:
// one line, one write(2). When it fails the call has no trace anywhere, so
// the caller must not run it unless it accepts unaudited calls. The line
// is not synced to the disk: it outlives the process (a crash, SIGKILL),
// not the machine (power loss, a kernel crash), like the records
// themselves.
func (l *Log) Start(rec Record) (Started, error) {
	rec = l.prepare(rec, nil)
	rec.Status = StatusStarted
	rec.Result, rec.ResultLength, rec.ResultTruncated, rec.ErrorCode, rec.DurationMS = "", 0, false, "", 0
	// The line is encoded in a pooled buffer, as final records are: it is
	// written at once and kept by nothing.
	bp, _ := l.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	line, args, err := appendRecordArgs((*bp)[:0], &rec)
	if err != nil {
		return Started{}, fmt.Errorf("audit: encode %s: %w", rec.CallID, err)
	}
	seg, err := l.append(l.days.of(rec.Timestamp), line)
	if err != nil {
		n := l.startFaults.Add(1)
		l.opts.Log.Error().Err(err).Str("call_id", rec.CallID).Int64("audit_start_faults", n).Msg("audit: cannot note the call's start in the journal")
		return Started{}, fmt.Errorf("audit: journal: %w", err)
	}
	// The final record has the same arguments: they are kept encoded, as
	// they are in the line. A line of common size goes back to the pool,
	// so the arguments are copied out of it; a large one is left to the
	// collector and keeps them.
	if cap(line) <= 64<<10 {
		args = bytes.Clone(args)
		*bp = line[:0]
		l.bufs.Put(bp)
	}
	return Started{seg: seg, args: args, cut: rec.ArgumentsTruncated}, nil
}

// Finish writes the final record of a call Start noted. The record appears
// whole under its name or not at all. When it cannot be written, the
// record goes to the journal instead and its segment is kept, so the next
// start writes it; if even that fails, the record is logged in full. The
// error says the record is not in its folder.
func (l *Log) Finish(st Started, rec Record) error {
	rec = l.prepare(rec, &st)
	bp, _ := l.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	// The record is encoded after room for its seq and prev, which the
	// chain writes in front of it once it has its place.
	buf, err := appendRecord(append((*bp)[:0], make([]byte, sealRoom)...), &rec)
	var data []byte
	if err == nil {
		*bp = buf[:0]
		day, name, ok := recordName(&rec, &l.days)
		if !ok {
			rel := FileName(rec)
			day, name = filepath.Dir(rel), filepath.Base(rel)
		}
		if data, err = l.seal(buf, day, name); err != nil {
			// Kept in the journal without a place in the chain, which it
			// gets when the next start writes it.
			data = buf[sealRoom:]
		}
	}
	seg := st.seg
	if err == nil {
		if seg != nil {
			seg.release()
		}
		// Nothing holds the record now: its buffer serves the next one,
		// unless a huge result made it large.
		if cap(buf) <= 64<<10 {
			l.bufs.Put(bp)
		}
		return nil
	}
	n := l.recordFaults.Add(1)
	ev := l.opts.Log.Error().Err(err).Str("call_id", rec.CallID).Int64("audit_record_faults", n)
	kept := false
	if seg != nil && data != nil {
		seg.keep.Store(true)
		if _, jerr := seg.f.Write(data); jerr == nil {
			kept = true
		} else {
			l.cur.CompareAndSwap(seg, nil)
			seg.retire()
		}
	}
	if seg != nil {
		seg.release()
	}
	switch {
	case kept:
		ev.Msg("audit: cannot write the final record; kept in the journal for the next start")
	case data == nil:
		ev.Msg("audit: cannot encode the final record")
	default:
		ev.RawJSON("record", bytes.TrimSpace(data)).Msg("audit: cannot write the final record, nor keep it in the journal; this line is its only copy")
	}
	return fmt.Errorf("audit: record %s: %w", rec.CallID, err)
}

// toStdout writes a final record to Options.Stdout, one line per record
// (data ends with its newline); lines from concurrent calls never mix.
func (l *Log) toStdout(data []byte) {
	if l.opts.Stdout == nil {
		return
	}
	l.stdoutMu.Lock()
	defer l.stdoutMu.Unlock()
	if _, err := l.opts.Stdout.Write(data); err != nil {
		l.opts.Log.Warn().Err(err).Msg("audit: cannot write a record to stdout")
	}
}

func (l *Log) fault(op string) error {
	if l.inject != nil {
		return l.inject(op)
	}
	return nil
}

// prepare puts rec in the form it is stored in: UTC, result and arguments
// cut, secret-looking arguments blanked. The arguments are taken as they
// were cleaned for the journal when st has them.
func (l *Log) prepare(rec Record, st *Started) Record {
	rec.Timestamp = rec.Timestamp.UTC()
	if rec.Replica == "" {
		rec.Replica = l.opts.Replica
	}
	// A record read back from the journal is cut already and keeps the
	// length of its full result.
	n := utf8.RuneCountInString(rec.Result)
	if n > rec.ResultLength {
		rec.ResultLength = n
	}
	if n > l.opts.MaxResultChars {
		rec.Result = runes.Prefix(rec.Result, l.opts.MaxResultChars)
		rec.ResultTruncated = true
	}
	if st != nil && st.seg != nil {
		rec.Arguments, rec.ArgumentsTruncated = st.args, st.cut
		return rec
	}
	// Cutting and blanking again changes nothing: a record read back from
	// the journal keeps its arguments and its flag.
	var cut bool
	rec.Arguments, cut = l.cleanArguments(rec.Arguments, st == nil)
	rec.ArgumentsTruncated = rec.ArgumentsTruncated || cut
	return rec
}

// ReadArguments are a call's arguments, valid JSON, with what the caller
// found in its one reading of them, so that the log does not read them
// again: to cut or blank them it walks Value instead of decoding JSON,
// and it records Compact as it is instead of compacting JSON. The log
// never changes Value.
type ReadArguments struct {
	JSON json.RawMessage
	// Compact is JSON without white space between its tokens, as
	// json.Compact writes it.
	Compact []byte
	// Value is JSON as a json.Decoder with UseNumber decodes it; nil: not
	// at hand (the log then decodes JSON when it has to cut or blank).
	// Start alone reads it: the caller may change it once Start has
	// returned (its checks drop nulls and rewrite numbers), so Finish,
	// where it has no journal line to take the arguments from, decodes
	// JSON.
	Value any
	// SecretNames is redact.MentionsSecretName(JSON).
	SecretNames bool
}

// MarshalJSON writes the arguments, for a record encoded by encoding/json.
func (a ReadArguments) MarshalJSON() ([]byte, error) { return a.JSON, nil }

// cleanArguments cuts long string values and blanks values of secret-looking
// keys. Small arguments without such keys pass through untouched. start
// says whether Start asks, which alone may read ReadArguments.Value.
func (l *Log) cleanArguments(args any, start bool) (any, bool) {
	if ra, ok := args.(ReadArguments); ok {
		switch {
		case len(ra.JSON) <= l.opts.MaxArgChars && !ra.SecretNames:
			return encodedArgs(ra.Compact), false
		case ra.Value != nil && start:
			cut := false
			return encodedArgs(l.appendClean(nil, ra.Value, &cut)), cut
		}
		args = ra.JSON
	}
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
	// A string too long to be kept whole is cut, before decoding, to a
	// prefix that still has more characters than are kept: the record is
	// the same, and a 50 MB argument is not decoded to be cut to 4000.
	raw, _ = jsonx.ShortenStrings(raw, jsonx.MaxEncodedRune*(l.opts.MaxArgChars+2))
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

// appendClean appends v cleaned as clean cleans it, encoded as
// json.Marshal encodes the result (keys sorted, HTML escaped), without
// changing v, which the caller's checks read after the log: the caller's
// value serves the log without a copy or a second decoding.
// TestAppendCleanMatchesClean holds the two together.
func (l *Log) appendClean(b []byte, v any, cut *bool) []byte {
	switch t := v.(type) {
	case map[string]any:
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(t)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonx.AppendStringHTML(b, k)
			b = append(b, ':')
			if redact.SecretName(k) {
				b = jsonx.AppendStringHTML(b, redact.Mask)
				continue
			}
			b = l.appendClean(b, t[k], cut)
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, el := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = l.appendClean(b, el, cut)
		}
		return append(b, ']')
	case string:
		if utf8.RuneCountInString(t) > l.opts.MaxArgChars {
			*cut = true
			t = runes.Prefix(t, l.opts.MaxArgChars)
		}
		return jsonx.AppendStringHTML(b, t)
	case json.Number:
		if t == "" {
			return append(b, '0')
		}
		return append(b, t...)
	case bool:
		return strconv.AppendBool(b, t)
	case nil:
		return append(b, "null"...)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, data...)
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
// many it deleted.
func (l *Log) Prune() (int, error) {
	if l.opts.RetentionDays <= 0 {
		return 0, nil
	}
	now := l.opts.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	cutoff := today.AddDate(0, 0, -l.opts.RetentionDays)
	entries, err := os.ReadDir(l.opts.Dir)
	if err != nil {
		return 0, fmt.Errorf("audit: prune: %w", err)
	}
	var old []string
	for _, e := range entries {
		day, err := time.Parse("2006-01-02", e.Name())
		if err == nil && day.Before(cutoff) {
			old = append(old, e.Name())
		}
	}
	if len(old) == 0 {
		return 0, nil
	}
	sort.Strings(old)
	// The cut goes into a digest before anything is deleted: a folder
	// gone without one is tampering, and one whose deletion failed after
	// the digest is still whole.
	if err := l.recordCut(old); err != nil {
		return 0, fmt.Errorf("audit: prune: %w", err)
	}
	n := 0
	for _, name := range old {
		l.files.forget(name)
		if err := os.RemoveAll(filepath.Join(l.opts.Dir, name)); err != nil {
			return n, fmt.Errorf("audit: prune: %w", err)
		}
		n++
	}
	return n, nil
}

// RunRetention prunes now and then every interval until ctx is done. Each
// round also reconciles the journals of processes that died meanwhile
// (another toolsvc on the same data folder).
func (l *Log) RunRetention(ctx context.Context, interval time.Duration) {
	round := func() {
		if n, err := l.Reconcile(); err != nil {
			l.opts.Log.Error().Err(err).Msg("audit reconciliation")
		} else if n > 0 {
			l.opts.Log.Warn().Int("interrupted", n).Msg("audit reconciliation")
		}
		if n, err := l.Prune(); err != nil {
			l.opts.Log.Error().Err(err).Msg("audit retention")
		} else if n > 0 {
			l.opts.Log.Info().Int("days_deleted", n).Msg("audit retention")
		}
	}
	round()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			round()
		}
	}
}

// Close ends the rounds of Options.RetentionInterval, then closes the
// journal and the folders' descriptors. A segment with no call left open
// is deleted; one with open calls stays for the next start to reconcile.
func (l *Log) Close() error {
	// A round in progress finishes before the folders close.
	if l.stopRetention != nil {
		l.stopRetention()
	}
	l.retention.Wait()
	if l.stopDigests != nil {
		l.stopDigests()
	}
	l.digests.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.finalDigest()
	}
	l.closed = true
	l.cur.Store(nil)
	l.segs.Range(func(k, _ any) bool {
		seg := k.(*segment)
		seg.retire()
		seg.end(false) // calls still open: their lines stay for the next start
		return true
	})
	l.files.close()
	return nil
}

// errClosed is returned by Start after Close.
var errClosed = errors.New("the audit log is closed")
