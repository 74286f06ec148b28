package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// maxEditBytes bounds the files edit_file loads whole.
const maxEditBytes = 16 << 20

// EditFile replaces exact text in a file, atomically.
type EditFile struct {
	tooldef.Def[editFileArgs]
	ws *workspace.Workspace
}

type editFileArgs struct {
	Path       string `json:"path" jsonschema:"File path relative to the workspace"`
	OldStr     string `json:"old_str" jsonschema:"The exact text to replace, including whitespace and indentation; include enough surrounding lines to make it unique"`
	NewStr     string `json:"new_str" jsonschema:"The text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"Replace every occurrence instead of requiring exactly one (default false)"`
}

// NewEditFile returns edit_file. The schema states the path bound the
// workspace enforces.
func NewEditFile(ws *workspace.Workspace) *EditFile {
	def := tooldef.New[editFileArgs]("edit_file",
		"Edit a text file in the workspace by replacing old_str, which must match the file exactly (whitespace included), with new_str. "+
			"old_str must occur exactly once unless replace_all is true; if it occurs more often, add surrounding lines to make it unique. "+
			"Read the file first to copy the text exactly.",
		func(p tooldef.Prop) {
			p.Prop("path").MinLength(1).MaxLength(workspace.MaxPathLen)
			p.Prop("old_str").MinLength(1)
		},
		tooldef.Sample(editFileArgs{Path: "a.txt", OldStr: "hello", NewStr: "hi"}),
		tooldef.Title("Edit file"), tooldef.Hints(tooldef.Destructive))
	return &EditFile{Def: def, ws: ws}
}

// MalformedHint is added when the model's arguments arrive truncated.
func (t *EditFile) MalformedHint() string {
	return "If new_str is large, make several smaller edits, or rewrite the file with write_file in chunks (mode=\"append\")."
}

func (t *EditFile) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	if args.OldStr == args.NewStr {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "old_str and new_str are the same, so the edit would change nothing.")
	}
	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return "", err
	}
	p, err := ws.Resolve(args.Path)
	if err != nil {
		return "", err
	}
	// Another edit of the same file, here or in another replica sharing the
	// workspace, waits until this one is written, and then edits what this
	// one wrote.
	f, release, err := p.OpenForEdit(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", toolerr.Errorf(toolerr.ToolError, "'%s' is being edited by another call, which did not finish in time. Next: retry the edit.", runes.Shorten(p.Display, runes.Echo))
		}
		return "", err
	}
	defer release()
	fi, err := f.Stat()
	if err != nil {
		return "", workspace.Explain(err, p)
	}
	if !fi.Mode().IsRegular() {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "'%s' is a folder or a special file, not a regular file.", runes.Shorten(p.Display, runes.Echo))
	}
	if fi.Size() > maxEditBytes {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "'%s' is %s, larger than edit_file handles (%s). Next: use exec with sed, or split the file.", runes.Shorten(p.Display, runes.Echo), humanSize(fi.Size()), humanSize(maxEditBytes))
	}
	// The file is read into one buffer of its size (one byte more tells a
	// file that grew meanwhile) and looked at as a string without a copy;
	// the edited text is built in one allocation of its final size and
	// written from the string. So an edit holds the file about twice.
	data := make([]byte, fi.Size()+1)
	n, err := io.ReadFull(f, data)
	if !workspace.LocksEdits {
		release() // the file cannot be replaced while it is open
	}
	switch {
	case err == nil:
		return "", toolerr.Errorf(toolerr.ToolError, "'%s' grew while it was read, so it was not edited. Next: retry the edit.", runes.Shorten(p.Display, runes.Echo))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
	default:
		return "", workspace.Explain(err, p)
	}
	data = data[:n]
	// data is never changed after this point, so the string may share it.
	text := unsafe.String(unsafe.SliceData(data), len(data))
	if strings.IndexByte(text, 0) >= 0 || !utf8.ValidString(text) {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "'%s' is not UTF-8 text, so it cannot be edited as text.", runes.Shorten(p.Display, runes.Echo))
	}

	count := strings.Count(text, args.OldStr)
	switch {
	case count == 0:
		msg := fmt.Sprintf("old_str was not found in '%s' (%d lines, %s). It must match exactly, including whitespace and indentation.", runes.Shorten(p.Display, runes.Echo), strings.Count(text, "\n")+1, humanSize(fi.Size()))
		if hint := nearMatch(text, args.OldStr); hint != "" {
			msg += " " + hint
		}
		return "", toolerr.Errorf(toolerr.NotFound, "%s Next: read the file with read_file and copy the text exactly.", msg)
	case count > 1 && !args.ReplaceAll:
		return "", toolerr.Errorf(toolerr.InvalidArguments, "old_str occurs %d times in '%s' (at lines %s), so the edit is ambiguous and nothing was changed. Next: include more surrounding lines in old_str to make it unique, or set replace_all=true to replace every occurrence.", count, runes.Shorten(p.Display, runes.Echo), linesOf(text, args.OldStr, 10))
	}
	first := strings.Count(text[:strings.Index(text, args.OldStr)], "\n") + 1
	if err := ws.WriteStrings(p, edited(text, args.OldStr, args.NewStr, count)...); err != nil {
		return "", err
	}
	if count == 1 {
		return fmt.Sprintf("Edited %s: replaced 1 occurrence at line %d", p.Display, first), nil
	}
	return fmt.Sprintf("Edited %s: replaced %d occurrences (first at line %d)", p.Display, count, first), nil
}

// maxEditParts bounds the pieces an edit is written from; an edit with
// more occurrences is built whole first.
const maxEditParts = 2049

// edited is text with the count occurrences of old replaced by repl, as
// pieces written one after another: the edited file is never built in
// memory, which for a large new_str would hold it twice more.
func edited(text, old, repl string, count int) []string {
	if 2*count+1 > maxEditParts {
		return []string{strings.ReplaceAll(text, old, repl)}
	}
	parts := make([]string, 0, 2*count+1)
	for range count {
		i := strings.Index(text, old)
		parts = append(parts, text[:i], repl)
		text = text[i+len(old):]
	}
	return append(parts, text)
}

// linesOf lists the line numbers where sub starts, at most limit of them.
func linesOf(text, sub string, limit int) string {
	var nums []string
	line, from := 1, 0
	for len(nums) < limit {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			break
		}
		line += strings.Count(text[from:from+i], "\n")
		nums = append(nums, fmt.Sprint(line))
		line += strings.Count(sub, "\n")
		from += i + len(sub)
	}
	return strings.Join(nums, ", ")
}

// nearMatch says where old_str would match if whitespace were ignored, the
// most common reason an edit misses. It looks at windows of as many lines
// as old_str has, starting at each of the first 200,000 lines, without
// splitting the file (which would cost a string header per line).
func nearMatch(text, old string) string {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	want := norm(old)
	if want == "" {
		return ""
	}
	span := strings.Count(old, "\n") + 1
	// end is where the window of span lines starting at start ends.
	start, end := 0, 0
	for range span {
		end = nextLine(text, end)
	}
	for i := 0; i < 200000; i++ {
		if norm(strings.TrimSuffix(text[start:end], "\n")) == want {
			return fmt.Sprintf("Text matching it apart from whitespace starts at line %d.", i+1)
		}
		if end >= len(text) {
			break
		}
		start, end = nextLine(text, start), nextLine(text, end)
	}
	return ""
}

// nextLine returns where the line after the one at off starts, or len(text).
func nextLine(text string, off int) int {
	if i := strings.IndexByte(text[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(text)
}

var _ registry.Tool = (*EditFile)(nil)
