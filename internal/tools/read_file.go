package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// SkillGate is consulted when read_file reads skills/<name>/SKILL.md.
type SkillGate interface {
	// CheckSkill returns an error to give the model instead of the file (a
	// disabled skill), or a notice to put on the first line of the output
	// (what the skill requires that is missing). root is the folder the
	// path was found in: the workspace, or the key's own folder.
	CheckSkill(root *os.Root, name string) (notice string, err error)
}

// ReadFile reads text files in the workspace, a line range at a time.
type ReadFile struct {
	tooldef.Def[readFileArgs]
	ws       *workspace.Workspace
	maxChars int
	skills   SkillGate
	readers  sync.Pool // *bufio.Reader of readBufSize, reused across calls
	small    sync.Pool // *bufio.Reader of smallBufSize, for files that fit
	outs     sync.Pool // *[]byte the lines of a file are gathered in
}

// maxPooledOut is the largest buffer of lines kept for the next call.
const maxPooledOut = 256 << 10

// readFileArgs are read_file's parameters. Exactly one of path and paths
// is given: a rule, not a schema requirement.
type readFileArgs struct {
	Path            string   `json:"path,omitempty" jsonschema:"File path relative to the workspace, e.g. src/main.py"`
	Paths           []string `json:"paths,omitempty" jsonschema:"Several files to read in one call, instead of path"`
	StartLine       int      `json:"start_line,omitempty" jsonschema:"First line to show, 1-based (default 1)"`
	EndLine         int      `json:"end_line,omitempty" jsonschema:"Last line to show, inclusive (default: as far as the output cap allows)"`
	ShowLineNumbers *bool    `json:"show_line_numbers,omitempty" jsonschema:"Prefix each line with its number (default true)"`
}

// DecodeMember reads one of read_file's arguments as encoding/json would,
// for registry.Decode's fast path (jsonx.DecodeMembers): a call's
// arguments are read without reflection. Keys are matched exactly; any
// other spelling is left to encoding/json.
func (a *readFileArgs) DecodeMember(key, val []byte) bool {
	known := true
	switch string(key) {
	case "path", "paths", "start_line", "end_line", "show_line_numbers":
	default:
		known = false
	}
	if jsonx.IsNull(val) {
		// encoding/json leaves a string or number alone and sets a slice
		// or pointer to nil, which each field is until it is given.
		return known
	}
	var ok bool
	switch string(key) {
	case "path":
		a.Path, ok = jsonx.String(val)
	case "paths":
		a.Paths, ok = jsonx.Strings(val)
	case "start_line":
		a.StartLine, ok = jsonx.Int(val)
	case "end_line":
		a.EndLine, ok = jsonx.Int(val)
	case "show_line_numbers":
		var b bool
		if b, ok = jsonx.Bool(val); ok {
			a.ShowLineNumbers = &b
		}
	}
	return ok
}

// readBufSize is the read buffer of one file; pooled, since allocating and
// clearing 64 KiB per call was most of the cost of reading a small file.
// Files that fit in smallBufSize take a small buffer instead: a pool is
// emptied by garbage collections, and refilling it with 64 KiB buffers
// for files of a few lines made collections more frequent still.
const (
	readBufSize  = 64 << 10
	smallBufSize = 4 << 10
)

// NewReadFile returns read_file. maxChars caps the output of one call;
// skills may be nil. The schema states the path bound the workspace
// enforces.
func NewReadFile(ws *workspace.Workspace, maxChars int, skills SkillGate) *ReadFile {
	def := tooldef.New[readFileArgs]("read_file",
		"Read a text file in the workspace, with numbered lines. Use start_line and end_line to read part of a large file; "+
			"long output is cut and says which start_line to continue from. Give paths to read several files at once. "+
			"Binary files are refused.",
		func(p tooldef.Prop) {
			p.Prop("path").MinLength(1).MaxLength(workspace.MaxPathLen)
			p.Prop("paths").MinItems(1).MaxItems(20).Items().MinLength(1).MaxLength(workspace.MaxPathLen)
			p.Prop("start_line").Minimum(1)
			p.Prop("end_line").Minimum(1)
		},
		tooldef.Sample(readFileArgs{Path: "a.txt"}),
		tooldef.Title("Read file"), tooldef.Hints(tooldef.ReadOnly, tooldef.Idempotent))
	return &ReadFile{Def: def, ws: ws, maxChars: maxChars, skills: skills}
}

// Rules are checked by the registry before Execute and stated in the
// description.
func (t *ReadFile) Rules() []registry.Rule {
	return []registry.Rule{registry.ExactlyOne("path", "paths"), registry.NotAfter("start_line", "end_line")}
}

func (t *ReadFile) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return "", err
	}
	opts := readOpts{start: max(args.StartLine, 1), end: args.EndLine, numbers: args.ShowLineNumbers == nil || *args.ShowLineNumbers}
	if args.Path != "" {
		out, _, err := t.readOne(ctx, ws, args.Path, opts, t.maxChars)
		return out, err
	}

	var b strings.Builder
	budget, failed, read := t.maxChars, 0, 0
	for i, p := range args.Paths {
		if i > 0 {
			b.WriteString("\n\n")
		}
		if budget <= 0 {
			fmt.Fprintf(&b, "[File: %s] not read: the output cap of %d characters is used up. Next: read it in another call.", p, t.maxChars)
			failed++
			continue
		}
		out, used, err := t.readOne(ctx, ws, p, opts, budget)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			fmt.Fprintf(&b, "[File: %s] Error: %s", p, err)
			failed++
			continue
		}
		b.WriteString(out)
		budget -= used
		read++
	}
	fmt.Fprintf(&b, "\n\nRead %d of %d files", read, len(args.Paths))
	if failed > 0 {
		fmt.Fprintf(&b, "; %d failed (see above)", failed)
	}
	b.WriteString(".")
	return b.String(), nil
}

type readOpts struct {
	start, end int // 1-based, inclusive; end 0 = no limit
	numbers    bool
}

// readOne reads one file and returns its section and the characters of
// file content it used from the budget.
func (t *ReadFile) readOne(ctx context.Context, ws *workspace.Workspace, name string, o readOpts, budget int) (string, int, error) {
	p, err := ws.Resolve(name)
	if err != nil {
		return "", 0, err
	}
	var notice string
	if skill, ok := skillName(p); ok && t.skills != nil {
		if notice, err = t.skills.CheckSkill(p.Root, skill); err != nil {
			return "", 0, err
		}
	}
	f, err := p.Open()
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, workspace.Explain(err, p)
	}
	if fi.IsDir() {
		return "", 0, toolerr.Errorf(toolerr.InvalidArguments, "'%s' is a folder, not a file. Next: use list_dir to see what it holds.", runes.Shorten(p.Display, runes.Echo))
	}
	if !fi.Mode().IsRegular() {
		return "", 0, toolerr.Errorf(toolerr.InvalidArguments, "'%s' is not a regular file (a device, pipe or socket) and cannot be read.", runes.Shorten(p.Display, runes.Echo))
	}
	sec, release, err := t.readSection(ctx, f, fi.Size(), o, budget)
	defer release()
	if err != nil {
		return "", 0, fileError(err, p.Display)
	}
	if notice != "" {
		notice += "\n"
	}
	switch {
	case sec.total == 0 && sec.complete:
		return notice + "[File: " + p.Display + " | Lines: 0]\n(empty file)", 0, nil
	case o.start > sec.lastSeen:
		return "", 0, toolerr.Errorf(toolerr.InvalidArguments, "start_line %d is beyond the end of '%s', which has %d lines. Next: use a start_line between 1 and %d.", o.start, runes.Shorten(p.Display, runes.Echo), sec.lastSeen, sec.lastSeen)
	}
	return renderSection(notice, p.Display, fi.Size(), o, sec), sec.used, nil
}

// readSection reads the lines o asks for from f (size bytes when opened)
// through pooled buffers. The section's text lives in one of them until
// release is called.
func (t *ReadFile) readSection(ctx context.Context, f io.Reader, size int64, o readOpts, budget int) (section, func(), error) {
	src := upToSize(f, size)
	pool, bufSize := &t.readers, readBufSize
	if size > 0 && size < smallBufSize {
		pool, bufSize = &t.small, smallBufSize
	}
	r, _ := pool.Get().(*bufio.Reader)
	if r == nil {
		r = bufio.NewReaderSize(src, bufSize)
	} else {
		r.Reset(src)
	}
	bp, _ := t.outs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	sec, err := readLines(ctx, r, o, budget, size, (*bp)[:0])
	*bp = sec.text[:0]
	r.Reset(nil)
	pool.Put(r)
	return sec, func() {
		// A buffer that held a large output is left to the collector.
		if cap(*bp) <= maxPooledOut {
			t.outs.Put(bp)
		}
	}, err
}

// renderSection builds a file's text once, at its final size: the header,
// which needs the count of lines, comes before the lines read to count
// them.
func renderSection(notice, display string, size int64, o readOpts, sec section) string {
	lines := strconv.Itoa(sec.total)
	if !sec.complete {
		lines = "more than " + strconv.Itoa(sec.lastSeen) + " (" + humanSize(size) + ")"
	}
	var num [40]byte
	showing := strconv.AppendInt(num[:0], int64(o.start), 10)
	showing = append(showing, '-')
	showing = strconv.AppendInt(showing, int64(sec.last), 10)
	var b strings.Builder
	b.Grow(len(notice) + len(display) + len(lines) + len(showing) + 32 + len(sec.text) + 1 + len(sec.note))
	b.WriteString(notice)
	b.WriteString("[File: ")
	b.WriteString(display)
	b.WriteString(" | Lines: ")
	b.WriteString(lines)
	b.WriteString(" | Showing: ")
	b.Write(showing)
	b.WriteString("]\n")
	b.Write(sec.text)
	if sec.note != "" {
		b.WriteString("\n")
		b.WriteString(sec.note)
	}
	return b.String()
}

// upToSize reads a file as large as it was when opened (size from Stat),
// and reports the end without asking the kernel once that much is read: a
// small file costs one read, not three (bufio asks again after each end of
// file it returns). Lines appended while it is read are left for the next
// call. A size of 0 may be a file that does not know its size: read to EOF.
func upToSize(f io.Reader, size int64) io.Reader {
	if size <= 0 {
		return f
	}
	return io.LimitReader(f, size)
}

// skillName reports whether p is skills/<name>/SKILL.md in the workspace.
func skillName(p workspace.Path) (string, bool) {
	if p.Outside {
		return "", false
	}
	dir, file := path.Split(p.Name)
	parent, name := path.Split(strings.TrimSuffix(dir, "/"))
	if file != "SKILL.md" || parent != "skills/" || name == "" {
		return "", false
	}
	return name, true
}

var (
	errBinary  = errors.New("binary")
	errNotUTF8 = errors.New("not utf-8")
)

func fileError(err error, display string) error {
	display = runes.Shorten(display, runes.Echo)
	switch {
	case errors.Is(err, errBinary):
		return toolerr.Errorf(toolerr.InvalidArguments, "'%s' looks like a binary file (it contains NUL bytes) and cannot be shown as text. Next: use exec with a tool such as 'file' or 'xxd | head' if you need to inspect it.", display)
	case errors.Is(err, errNotUTF8):
		return toolerr.Errorf(toolerr.InvalidArguments, "'%s' is not UTF-8 text (binary data or another encoding) and cannot be shown. Next: convert it, e.g. exec 'iconv -f GBK -t UTF-8 %s'.", display, display)
	}
	return err
}

// section is what readLines found.
type section struct {
	text     []byte // the lines shown, in the buffer readLines was given
	used     int    // characters of content in text
	last     int    // last line shown
	lastSeen int    // last line number read (== total when complete)
	total    int    // lines in the file, when complete
	complete bool   // the whole file was read, so total is known
	note     string
}

// countLimit is the file size up to which the total number of lines is
// counted even past the range shown; beyond it the count would cost more
// than the lines asked for.
const countLimit = 4 << 20

// readLines streams f and keeps only the lines asked for, within budget
// characters, appending them to out (the section's text). A range of a
// huge file costs the lines read up to it: past the range, lines are only
// counted, and only in files up to countLimit.
func readLines(ctx context.Context, r *bufio.Reader, o readOpts, budget int, size int64, out []byte) (section, error) {
	if head, _ := r.Peek(8000); bytes.IndexByte(head, 0) >= 0 {
		return section{text: out}, errBinary
	}
	width := digits(max(o.end, o.start+200))
	var (
		b    = out
		sec  section
		line []byte
		done bool // the range is shown (or the cap reached); only counting from here
		eof  bool
	)
	for n := 1; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			sec.text = b
			return sec, ctx.Err()
		}
		if done && size > countLimit {
			break
		}
		chunk, err := r.ReadSlice('\n')
		if len(chunk) == 0 && err == io.EOF {
			eof = true
			break
		}
		if err != nil && err != bufio.ErrBufferFull && err != io.EOF {
			sec.text = b
			return sec, err
		}
		sec.lastSeen = n
		if done || n < o.start {
			err = skipLine(r, err)
		} else {
			// Keep at most what the budget could show of the line.
			// A line whole in the reader's buffer is used where it is
			// (until the next read); a longer one is gathered in line.
			kept := chunk
			if err == bufio.ErrBufferFull || len(chunk) > budget*utf8.UTFMax {
				line, err = keepLine(r, line, chunk, err, budget*utf8.UTFMax)
				kept = line
			}
			text := trimEOL(kept)
			if !validUTF8(text) {
				sec.text = b
				return sec, errNotUTF8
			}
			b, done = sec.show(b, n, width, text, o.numbers, budget)
			if o.end != 0 && n >= o.end {
				done = true
			}
		}
		if err == io.EOF {
			eof = true
			break
		}
	}
	sec.text = bytes.TrimSuffix(b, []byte("\n"))
	sec.complete = eof
	if eof {
		sec.total = sec.lastSeen
	}
	if sec.note == "" && sec.last > 0 && (!eof || sec.total > sec.last) {
		sec.note = "[More lines follow. Next: continue with start_line=" + strconv.Itoa(sec.last+1) + ".]"
	}
	return sec, nil
}

// digits is the number of decimal digits of n >= 0.
func digits(n int) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// skipLine reads past the rest of a line whose first part ReadSlice
// returned with err, however long, without keeping it, and returns the
// last read's error.
func skipLine(r *bufio.Reader, err error) error {
	for err == bufio.ErrBufferFull {
		_, err = r.ReadSlice('\n')
	}
	return err
}

// keepLine reads the rest of a line whose first part ReadSlice returned
// as chunk with err, into line (reused), keeping at most limit bytes, and
// returns it with the last read's error.
func keepLine(r *bufio.Reader, line, chunk []byte, err error, limit int) ([]byte, error) {
	line = append(line[:0], chunk...)
	for err == bufio.ErrBufferFull {
		chunk, err = r.ReadSlice('\n')
		if len(line) <= limit {
			line = append(line, chunk...)
		}
	}
	if len(line) > limit {
		// The cut may split a character: drop its broken tail.
		line = line[:limit]
		for i := 0; i < utf8.UTFMax && !utf8.Valid(line); i++ {
			line = line[:len(line)-1]
		}
	}
	return line, err
}

// show appends line n to b if it fits in what is left of budget
// characters; a first line longer than the budget is cut to it. It
// returns true when the budget is spent, with the note saying how to go
// on.
func (sec *section) show(b []byte, n, width int, text []byte, numbers bool, budget int) ([]byte, bool) {
	chars := utf8.RuneCount(text)
	remaining := budget - sec.used
	switch {
	case chars <= remaining:
		b = appendLine(b, n, width, text, numbers)
		sec.used += chars
		sec.last = n
		return b, false
	case sec.last == 0:
		// One line longer than the cap: show its start.
		b = appendLine(b, n, width, []byte(runes.Prefix(string(text), remaining)), numbers)
		sec.used += remaining
		sec.last = n
		sec.note = fmt.Sprintf("[Line %d is longer than the output cap of %d characters and was cut. Next: continue with start_line=%d, or use exec with 'cut -c' to see the rest of that line.]", n, budget, n+1)
		return b, true
	default:
		sec.note = fmt.Sprintf("[Output cut at %d characters. Next: continue with start_line=%d.]", budget, n)
		return b, true
	}
}

// appendLine appends line n, after its number right-aligned in width
// columns and "| " when numbers are shown.
func appendLine(b []byte, n, width int, text []byte, numbers bool) []byte {
	if numbers {
		var d [20]byte
		num := strconv.AppendInt(d[:0], int64(n), 10)
		for range width - len(num) {
			b = append(b, ' ')
		}
		b = append(b, num...)
		b = append(b, '|', ' ')
	}
	b = append(b, text...)
	return append(b, '\n')
}

var (
	_ registry.Tool  = (*ReadFile)(nil)
	_ registry.Ruled = (*ReadFile)(nil)
)

// trimEOL is bytes.TrimRight(line, "\r\n"), without building the cut set
// on every line.
func trimEOL(line []byte) []byte {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	return line
}

// validUTF8 is utf8.Valid, with short ASCII lines checked without its
// set-up, which costs more than they do; a long line is left to it.
func validUTF8(line []byte) bool {
	if len(line) > 32 {
		return utf8.Valid(line)
	}
	for i, c := range line {
		if c >= utf8.RuneSelf {
			return utf8.Valid(line[i:])
		}
	}
	return true
}
