package memory

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Kinds of line, kept per line in the index.
const (
	kindEntry     = iota // YYYY-MM-DD|source|content
	kindMalformed        // text in another form (hand-written)
	kindBlank
)

// verifyWindow is how many bytes at the start and before the end of what
// the index holds are compared with the file before new bytes are read
// incrementally. It catches the usual hand edits in place (the first or
// last lines rewritten) that also grow the file. Editors that save by
// rename give a new inode, and any change that shrinks the file or keeps
// its size changes size or mtime: those reload the whole file. An in-place
// rewrite that grows the file and changes only its middle is the one case
// seen late (at the next shrink, rename or restart).
const verifyWindow = 4096

// index is the memory file parsed once and kept while the file only grows:
// the complete lines lower-cased (for search), where each line starts, and
// what kind each line is. New bytes appended by this or another process
// are read incrementally; any other change reloads it.
//
// The lines as written are not kept: a line shown in a result is read
// from the file at its offset (one pread per line, for the few lines a
// result holds). So the index costs the folded text (the file's size, give
// or take a few case changes in other scripts) plus 5 bytes per line, and
// 4 more per line only if folding changed some line's length.
type index struct {
	loaded   bool // describes an existing file
	dev, ino uint64
	size     int64 // file size when last read
	mtime    time.Time

	rawLen  int64    // bytes of complete lines in the file
	fold    []byte   // the complete lines lower-cased
	starts  []uint32 // start of each line in the file
	fstarts []uint32 // start of each line in fold; nil while equal to starts
	kinds   []uint8
	head    []byte // the first verifyWindow bytes of the complete lines
	end     []byte // the last verifyWindow bytes of the complete lines

	entries   int     // non-blank lines
	malformed []int32 // line numbers (1-based)
	blank     []int32
	first     string // earliest and latest entry dates
	last      string

	// tail is the length of the file's last line when it has no line
	// break: a write cut short (a full disk, a crash) or a hand edit. It is
	// not a line of the index, and the next refresh reads it again.
	tail int
}

func (x *index) reset() { *x = index{} }

// lines returns the number of complete lines.
func (x *index) lines() int { return len(x.starts) }

// refresh brings the index up to date with f, whose description is fi.
func (x *index) refresh(f *os.File, fi fs.FileInfo, maxBytes int64) error {
	if fi.Size() > maxBytes {
		x.reset()
		return &TooLargeError{Size: fi.Size(), Max: maxBytes}
	}
	dev, ino := fileID(fi)
	same := x.loaded && dev == x.dev && ino == x.ino
	switch {
	case same && fi.Size() == x.size && fi.ModTime().Equal(x.mtime):
		return nil
	case same && fi.Size() > x.size && x.unchanged(f):
		// Grown: read from the end of the complete lines, which also
		// re-reads an unterminated tail.
	default:
		x.reset()
	}
	x.loaded, x.dev, x.ino = true, dev, ino
	// Read in chunks, so that loading holds no second copy of the file.
	from := x.rawLen
	whole := from == 0
	size := fi.Size()
	x.fold = slices.Grow(x.fold, int(size-from)) // exact unless folding changes lengths
	buf := make([]byte, min(size-from, loadChunk))
	var carry int // bytes of an unfinished line at the start of buf
	for from < size {
		n, err := f.ReadAt(buf[carry:min(len(buf), carry+int(size-from))], from)
		if err != nil && !errors.Is(err, io.EOF) {
			x.reset()
			return err
		}
		if n == 0 {
			break // the file shrank meanwhile
		}
		from += int64(n)
		got := buf[:carry+n]
		complete := bytes.LastIndexByte(got, '\n') + 1
		x.add(got[:complete])
		carry = copy(buf, got[complete:])
		if carry == len(buf) {
			// One line longer than the buffer: grow it.
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
	x.size, x.mtime = from, fi.ModTime()
	x.tail = carry
	// Appending grew the per-line slices by up to a quarter more than they
	// hold; after a load from the start, give that back.
	if whole && cap(x.starts) > len(x.starts)+len(x.starts)/16 {
		x.starts = slices.Clip(slices.Clone(x.starts))
		x.kinds = slices.Clip(slices.Clone(x.kinds))
		if x.fstarts != nil {
			x.fstarts = slices.Clip(slices.Clone(x.fstarts))
		}
	}
	return nil
}

// bytes returns the memory the index holds, by the capacity of its slices.
func (x *index) bytes() int {
	return cap(x.fold) + 4*cap(x.starts) + 4*cap(x.fstarts) + cap(x.kinds) + cap(x.head) + cap(x.end) +
		4*cap(x.malformed) + 4*cap(x.blank)
}

// loadChunk is how much of the file refresh reads at a time.
const loadChunk = 1 << 20

// unchanged reports whether the file still holds, at the start and before
// the end of the complete lines, the bytes the index saw there.
func (x *index) unchanged(f *os.File) bool {
	for _, w := range []struct {
		at   int64
		want []byte
	}{{0, x.head}, {x.rawLen - int64(len(x.end)), x.end}} {
		buf := make([]byte, len(w.want))
		if _, err := f.ReadAt(buf, w.at); err != nil {
			return false
		}
		if !bytes.Equal(buf, w.want) {
			return false
		}
	}
	return true
}

// add appends complete lines (chunk ends with '\n' or is empty).
func (x *index) add(chunk []byte) {
	if len(chunk) == 0 {
		return
	}
	base := x.rawLen
	if len(x.head) < verifyWindow {
		x.head = append(x.head, chunk[:min(len(chunk), verifyWindow-len(x.head))]...)
	}
	if len(chunk) >= verifyWindow {
		x.end = append(x.end[:0], chunk[len(chunk)-verifyWindow:]...)
	} else {
		x.end = append(x.end, chunk...)
		x.end = x.end[:copy(x.end, x.end[max(0, len(x.end)-verifyWindow):])]
	}
	x.rawLen += int64(len(chunk))
	fbase := len(x.fold)
	x.fold = appendFold(x.fold, chunk)
	first := len(x.starts)
	for off := 0; off < len(chunk); {
		nl := bytes.IndexByte(chunk[off:], '\n')
		line := chunk[off : off+nl]
		n := int32(len(x.starts) + 1)
		x.starts = append(x.starts, uint32(base+int64(off)))
		kind := classify(line)
		x.kinds = append(x.kinds, kind)
		switch kind {
		case kindEntry:
			x.entries++
			x.noteDate(string(line[:len(DateLayout)]))
		case kindMalformed:
			x.entries++
			x.malformed = append(x.malformed, n)
		case kindBlank:
			x.blank = append(x.blank, n)
		}
		off += nl + 1
	}
	if x.fstarts == nil && len(x.fold) == int(x.rawLen) {
		return // folding kept every length: fold offsets are the file's
	}
	if x.fstarts == nil {
		x.fstarts = slices.Clone(x.starts[:first])
	}
	folded := x.fold[fbase:]
	for off := 0; off < len(folded); {
		x.fstarts = append(x.fstarts, uint32(fbase+off))
		off += bytes.IndexByte(folded[off:], '\n') + 1
	}
}

// fstart returns where line i starts in fold.
func (x *index) fstart(i int) int {
	if x.fstarts == nil {
		return int(x.starts[i])
	}
	return int(x.fstarts[i])
}

func (x *index) noteDate(d string) {
	if x.first == "" || d < x.first {
		x.first = d
	}
	if d > x.last {
		x.last = d
	}
}

func classify(line []byte) uint8 {
	text := strings.TrimSuffix(string(line), "\r")
	if strings.TrimSpace(text) == "" {
		return kindBlank
	}
	if _, _, ok := parseLine(text); ok {
		return kindEntry
	}
	return kindMalformed
}

// line returns line i (0-based), read from f at its offset. A file
// rewritten since the refresh may give other text; it is shown as read.
func (x *index) line(f *os.File, i int) Line {
	end := x.rawLen - 1
	if i+1 < len(x.starts) {
		end = int64(x.starts[i+1]) - 1
	}
	b := make([]byte, end-int64(x.starts[i]))
	n, _ := f.ReadAt(b, int64(x.starts[i]))
	l := Line{N: i + 1, Text: strings.TrimSuffix(string(b[:n]), "\r")}
	l.Date, l.Source, _ = parseLine(l.Text)
	return l
}

// blankAt reports whether line i (0-based) is blank.
func (x *index) blankAt(i int) bool { return x.kinds[i] == kindBlank }

// stats describes the complete lines of the file.
func (x *index) stats() Stats {
	return Stats{Lines: x.lines(), Entries: x.entries, First: x.first, Last: x.last, Exists: x.loaded,
		Malformed: toInts(x.malformed), Blank: toInts(x.blank), Unterminated: x.tail}
}

func toInts(v []int32) []int {
	out := make([]int, len(v))
	for i, n := range v {
		out[i] = int(n)
	}
	return out
}

// search returns the lines (0-based indexes, newest first, at most max)
// holding any (or, with all, every) keyword, and how many lines match in
// all. Keywords must be folded with foldString.
//
// It scans the lower-cased file once per keyword with bytes.Index, which
// skips over non-matching text at memory speed, and marks each line at
// most once per keyword; a line is then in when its mark count is right.
func (x *index) search(kws []string, all bool, limit int) (hits []int, total int) {
	n := len(x.starts)
	need := uint8(1)
	if all {
		need = uint8(len(kws))
	}
	if n == 0 {
		return hits, total
	}
	counts := make([]uint8, n)
	for _, kw := range kws {
		k := []byte(kw)
		index := bytes.Index
		if x.denseStart(k) {
			index = indexWindowed
		}
		line := 0
		for pos := 0; pos < len(x.fold); {
			i := index(x.fold[pos:], k)
			if i < 0 {
				break
			}
			p := pos + i
			for line+1 < n && x.fstart(line+1) <= p {
				line++
			}
			counts[line]++
			if line+1 < n {
				pos = x.fstart(line + 1)
			} else {
				break
			}
		}
	}
	for i := n - 1; i >= 0; i-- {
		if counts[i] >= need {
			total++
			if len(hits) < limit {
				hits = append(hits, i)
			}
		}
	}
	return hits, total
}

// Windowed search: bytes.Index looks for the first byte of the keyword and
// checks each place it occurs, which is slow when that byte is frequent
// ("t" of "tea" in English text: a call per few bytes). On slices of at
// most window bytes it instead compares the whole keyword with SIMD
// instructions at every offset, at a steady cost per byte.
const (
	window        = 64 // bytealg.MaxBruteForce on amd64
	windowMaxKey  = 16 // longer keywords step too little per window
	sampleBytes   = 1 << 20
	denseFraction = 50 // a first byte in more than 1/50 of the text is dense
)

// denseStart reports whether the keyword's first byte is frequent in the
// text, judged on a sample, so that indexWindowed is the faster scan. Only
// ASCII first bytes qualify: the lead byte of a Chinese character is
// frequent too, but bytes.Index already switches to its SIMD comparison
// when so many candidates fail, and between hits it stays there.
func (x *index) denseStart(k []byte) bool {
	if len(k) > windowMaxKey || k[0] >= utf8.RuneSelf {
		return false
	}
	sample := x.fold[:min(len(x.fold), sampleBytes)]
	return bytes.Count(sample, k[:1])*denseFraction > len(sample)
}

// indexWindowed is bytes.Index(s, k) computed window by window.
func indexWindowed(s, k []byte) int {
	step := window - len(k) + 1
	for pos := 0; pos < len(s); pos += step {
		if i := bytes.Index(s[pos:min(pos+window, len(s))], k); i >= 0 {
			return pos + i
		}
	}
	return -1
}

// appendFold appends src lower-cased to dst. ASCII is folded byte by byte;
// other characters through unicode.ToLower (Chinese and other scripts
// without case stay as they are); invalid UTF-8 is copied unchanged. Line
// breaks are kept, so lines line up with the original.
func appendFold(dst, src []byte) []byte {
	dst = slices.Grow(dst, len(src))
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, c)
			i++
			continue
		}
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
		i += size
	}
	return dst
}

// foldString lower-cases s the way the index folds the file.
func foldString(s string) string { return string(appendFold(nil, []byte(s))) }
