package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/memory"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// Bounds of the memory tool's output.
const (
	memoryMaxOutput     = 40000 // characters of one result
	memoryMaxHitChars   = 2000  // characters of one search hit; read shows the whole line
	memoryMaxRange      = 200   // lines one read may ask for
	memoryDefaultRange  = 50    // lines read when only one end of the range is given
	memoryMaxListed     = 20    // malformed or blank line numbers named in a note
	memoryMaxKeywords   = 20
	memoryMaxShown      = 100 // largest max_results and recent_count
	memoryDefaultHits   = 15  // entries search shows without max_results
	memoryDefaultRecent = 10  // entries read shows without a range or recent_count
)

// Memory is the agent's long-term memory: one tool whose action writes an
// entry, searches the entries, or reads them, over a memory.Store.
type Memory struct {
	tooldef.Def[memoryArgs]
	ws   *workspace.Workspace
	open func(*workspace.Workspace) *memory.Store
	// stores holds the store of each workspace folder used so far (the
	// workspace's, and each key's own): *workspace.Workspace to
	// *memory.Store. A folder's store lives as long as the folder.
	stores sync.Map
}

// memoryArgs: only action is required; content and keywords are required
// by rules, per action.
type memoryArgs struct {
	Action      string `json:"action" jsonschema:"write: save one entry; search: find entries by keywords; read: show the newest entries or a line range"`
	Content     string `json:"content,omitempty" jsonschema:"write: the fact to remember, self-contained (who, what, when); line breaks become spaces"`
	Keywords    string `json:"keywords,omitempty" jsonschema:"search: space-separated keywords, matched case-insensitively as substrings of the whole entry (date and source included); works for Chinese, e.g. '部署 测试'"`
	MatchMode   string `json:"match_mode,omitempty" jsonschema:"search: 'or' = entries with any keyword (default), 'and' = entries with every keyword"`
	MaxResults  int    `json:"max_results,omitempty"`
	StartLine   int    `json:"start_line,omitempty" jsonschema:"read: first line of a range, 1-based (line numbers are those search shows)"`
	EndLine     int    `json:"end_line,omitempty"`
	RecentCount int    `json:"recent_count,omitempty"`
}

// NewMemory returns the memory tool over the memory of ws: one store per
// folder, made by open, so that a key with a folder of its own has a
// memory of its own in it. The schema states the bounds and defaults the
// tool applies.
func NewMemory(ws *workspace.Workspace, open func(*workspace.Workspace) *memory.Store) *Memory {
	def := tooldef.New[memoryArgs]("memory",
		"Long-term memory kept across sessions in memory/MEMORY.md, one entry per line 'YYYY-MM-DD|source|content'. "+
			"action=write saves a fact worth remembering (content); action=search finds entries by space-separated keywords "+
			"(match_mode or|and, newest first, with line numbers); action=read shows the recent_count newest entries, or lines start_line..end_line. "+
			"Search memory before asking the user something they may have told you already.",
		func(p tooldef.Prop) {
			p.Prop("action").Enum("write", "search", "read")
			p.Prop("content").MinLength(1).MaxLength(4000)
			p.Prop("keywords").MinLength(1).MaxLength(500)
			p.Prop("match_mode").Enum("or", "and")
			p.Prop("max_results").Minimum(1).Maximum(memoryMaxShown).
				Description(fmt.Sprintf("search: most entries shown, newest first (default %d)", memoryDefaultHits))
			p.Prop("start_line").Minimum(1)
			p.Prop("end_line").Minimum(1).
				Description(fmt.Sprintf("read: last line of the range, inclusive (at most %d lines per call)", memoryMaxRange))
			p.Prop("recent_count").Minimum(1).Maximum(memoryMaxShown).
				Description(fmt.Sprintf("read without a range: how many of the newest entries to show (default %d)", memoryDefaultRecent))
		},
		tooldef.Sample(memoryArgs{Action: "read"}),
		// None holds: a write adds an entry to the memory file, and
		// removes nothing.
		tooldef.Title("Long-term memory"), tooldef.Hints())
	return &Memory{Def: def, ws: ws, open: open}
}

// Rules are checked by the registry before Execute and stated in the
// description.
func (t *Memory) Rules() []registry.Rule {
	return []registry.Rule{
		registry.RequiredWhen("action", "write", "content"),
		registry.RequiredWhen("action", "search", "keywords"),
		registry.NotAfter("start_line", "end_line"),
	}
}

func (t *Memory) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	store, err := t.store(ctx)
	if err != nil {
		return "", err
	}
	var out string
	switch args.Action {
	case "write":
		out, err = t.write(ctx, store, args)
	case "search":
		out, err = t.search(ctx, store, args)
	default:
		out, err = t.read(ctx, store, args)
	}
	if err != nil {
		return "", memoryError(err)
	}
	return out, nil
}

// store returns the memory of the call's folder.
func (t *Memory) store(ctx context.Context) (*memory.Store, error) {
	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return nil, err
	}
	if s, ok := t.stores.Load(ws); ok {
		return s.(*memory.Store), nil
	}
	s, _ := t.stores.LoadOrStore(ws, t.open(ws))
	return s.(*memory.Store), nil
}

func (t *Memory) write(ctx context.Context, store *memory.Store, a memoryArgs) (string, error) {
	call, _ := registry.CallFrom(ctx)
	w, err := store.Write(ctx, call.Source, a.Content)
	if err != nil {
		return "", err
	}
	if w.Line == 0 {
		return fmt.Sprintf("Saved to %s (the file is too large for the entries to be counted):\n%s", memory.Path, w.Text), nil
	}
	return fmt.Sprintf("Saved to %s as entry %d (line %d); the memory now holds %d %s:\n%s",
		memory.Path, w.Entry, w.Line, w.Total, runes.Plural(w.Total, "entry", "entries"), w.Text), nil
}

func (t *Memory) search(ctx context.Context, store *memory.Store, a memoryArgs) (string, error) {
	kws := strings.Fields(a.Keywords)
	if len(kws) > memoryMaxKeywords {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "Invalid parameters for tool 'memory': %d keywords given; at most %d are allowed. Next: keep the most specific ones.", len(kws), memoryMaxKeywords)
	}
	all := a.MatchMode == "and"
	maxResults := a.MaxResults
	if maxResults == 0 {
		maxResults = memoryDefaultHits
	}
	res, err := store.Search(ctx, kws, all, maxResults)
	if err != nil {
		return "", err
	}
	mode := "any"
	if all {
		mode = "all"
	}
	query := strings.Join(kws, " ")
	if res.Stats.Entries == 0 {
		return fmt.Sprintf("Memory is empty: %s has no entries yet. Next: save facts with action=write.", memory.Path) + unterminatedNote(res.Stats), nil
	}
	if res.Total == 0 {
		return fmt.Sprintf("No entries match %s of '%s' in %s (%d %s). Next: try other or fewer keywords, match_mode=or, or action=read to see the newest entries.",
			mode, query, memory.Path, res.Stats.Entries, runes.Plural(res.Stats.Entries, "entry", "entries")) + unterminatedNote(res.Stats), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Found %d %s matching %s of '%s' in %s (%d %s)", res.Total, runes.Plural(res.Total, "entry", "entries"), mode, query, memory.Path,
		res.Stats.Entries, runes.Plural(res.Stats.Entries, "entry", "entries"))
	if len(res.Hits) < res.Total {
		fmt.Fprintf(&b, "; showing the %d newest", len(res.Hits))
	} else {
		b.WriteString(", newest first")
	}
	b.WriteString(":\n")
	shown, budget := 0, memoryMaxOutput
	for _, h := range res.Hits {
		text := h.Text
		if n := utf8.RuneCountInString(text); n > memoryMaxHitChars {
			text = fmt.Sprintf("%s ... (%d more characters; read the whole line with action=read start_line=%d end_line=%d)",
				runes.Prefix(text, memoryMaxHitChars), n-memoryMaxHitChars, h.N, h.N)
		}
		n := utf8.RuneCountInString(text)
		if n > budget {
			break
		}
		budget -= n
		fmt.Fprintf(&b, "[%d] %s\n", h.N, text)
		shown++
	}
	if shown < res.Total {
		fmt.Fprintf(&b, "[Only the %d newest of %d matches are shown. Next: use more specific keywords or match_mode=and, raise max_results (up to %d), or read older lines with action=read start_line/end_line.]\n",
			shown, res.Total, memoryMaxShown)
	}
	return strings.TrimSuffix(b.String(), "\n") + unterminatedNote(res.Stats), nil
}

// unterminatedNote tells the model about a last line without a line break,
// which memory ignores.
func unterminatedNote(st memory.Stats) string {
	if st.Unterminated == 0 {
		return ""
	}
	return fmt.Sprintf("\nNote: the file ends with %d bytes without a line break (a write cut short, or a hand edit); they are not read as an entry. The next write puts them on a line of their own.", st.Unterminated)
}

func (t *Memory) read(ctx context.Context, store *memory.Store, a memoryArgs) (string, error) {
	ranged := a.StartLine > 0 || a.EndLine > 0
	var (
		lines []memory.Line
		st    memory.Stats
		err   error
		cut   bool // the range asked for was longer than one read shows
	)
	start, end := a.StartLine, a.EndLine
	if ranged {
		start, end, cut = memoryRange(start, end)
		lines, st, err = store.Range(ctx, start, end)
	} else {
		n := a.RecentCount
		if n == 0 {
			n = memoryDefaultRecent
		}
		lines, st, err = store.Recent(ctx, n)
	}
	if err != nil {
		return "", err
	}
	if st.Entries == 0 && (!ranged || st.Lines == 0) {
		return fmt.Sprintf("Memory is empty: %s has no entries yet. Next: save facts with action=write.", memory.Path) + unterminatedNote(st), nil
	}
	if ranged && start > st.Lines {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "start_line %d is beyond the end of %s, which has %d lines. Next: use a start_line between 1 and %d, or omit the range to see the newest entries.",
			start, memory.Path, st.Lines, max(st.Lines, 1))
	}

	var b strings.Builder
	writeMemoryHeader(&b, st, lines, ranged, start)
	last, linesCut := writeMemoryLines(&b, lines)
	cut = cut || linesCut
	if ranged && last < st.Lines {
		fmt.Fprintf(&b, "[More lines follow (%d-%d). Next: continue with start_line=%d.]\n", last+1, st.Lines, last+1)
	} else if !ranged && len(lines) < st.Entries && last == lines[len(lines)-1].N {
		fmt.Fprintf(&b, "[Not shown: %d older %s. Next: raise recent_count (up to 100), search with action=search, or read a range with start_line/end_line.]\n",
			st.Entries-len(lines), runes.Plural(st.Entries-len(lines), "entry", "entries"))
	} else if cut && !ranged {
		fmt.Fprintf(&b, "[Output cut at %d characters. Next: read a range with start_line/end_line.]\n", memoryMaxOutput)
	}
	writeMemoryNotes(&b, st)
	return strings.TrimSuffix(b.String(), "\n") + unterminatedNote(st), nil
}

// memoryRange completes a line range with one end given (the other
// memoryDefaultRange lines away) and shortens one longer than
// memoryMaxRange, saying so with cut.
func memoryRange(start, end int) (int, int, bool) {
	switch {
	case start == 0:
		start = max(1, end-memoryDefaultRange+1)
	case end == 0:
		end = start + memoryDefaultRange - 1
	case end-start+1 > memoryMaxRange:
		return start, start + memoryMaxRange - 1, true
	}
	return start, end, false
}

// writeMemoryHeader writes the file's summary and what the lines below
// are: a range from start, or the newest entries.
func writeMemoryHeader(b *strings.Builder, st memory.Stats, lines []memory.Line, ranged bool, start int) {
	fmt.Fprintf(b, "%s: %d %s in %d %s", memory.Path, st.Entries, runes.Plural(st.Entries, "entry", "entries"), st.Lines, runes.Plural(st.Lines, "line", "lines"))
	if st.First != "" {
		fmt.Fprintf(b, ", dated %s to %s", st.First, st.Last)
	}
	b.WriteString(".\n")
	if ranged {
		fmt.Fprintf(b, "Lines %d-%d:\n", start, lines[len(lines)-1].N)
	} else {
		if len(lines) == st.Entries {
			fmt.Fprintf(b, "All %d %s, oldest first:\n", len(lines), runes.Plural(len(lines), "entry", "entries"))
		} else if len(lines) == 1 {
			b.WriteString("The newest entry:\n")
		} else {
			fmt.Fprintf(b, "The %d newest entries, oldest first:\n", len(lines))
		}
	}
}

// writeMemoryLines writes lines numbered, within memoryMaxOutput
// characters (a first line longer than that is cut to it), and returns
// the number of the last line written and whether any were left out.
func writeMemoryLines(b *strings.Builder, lines []memory.Line) (last int, cut bool) {
	budget := memoryMaxOutput
	for _, l := range lines {
		n := utf8.RuneCountInString(l.Text)
		if n > budget {
			if last == 0 {
				fmt.Fprintf(b, "[%d] %s\n[Line %d is longer than the output cap of %d characters and was cut.]\n", l.N, runes.Prefix(l.Text, budget), l.N, memoryMaxOutput)
				last = l.N
			}
			cut = true
			break
		}
		fmt.Fprintf(b, "[%d] %s\n", l.N, l.Text)
		budget -= n
		last = l.N
	}
	return last, cut
}

// writeMemoryNotes notes the malformed and blank lines of the file.
func writeMemoryNotes(b *strings.Builder, st memory.Stats) {
	if len(st.Malformed) > 0 {
		fmt.Fprintf(b, "Note: %d %s not in the form YYYY-MM-DD|source|content (kept as written): %s.\n",
			len(st.Malformed), runes.Plural(len(st.Malformed), "line is", "lines are"), memoryLineList(st.Malformed))
	}
	if len(st.Blank) > 0 {
		fmt.Fprintf(b, "Note: %d blank %s: %s.\n", len(st.Blank), runes.Plural(len(st.Blank), "line", "lines"), memoryLineList(st.Blank))
	}
}

// memoryLineList names at most memoryMaxListed line numbers.
func memoryLineList(ns []int) string {
	parts := make([]string, 0, min(len(ns), memoryMaxListed))
	for _, n := range ns[:min(len(ns), memoryMaxListed)] {
		parts = append(parts, fmt.Sprint(n))
	}
	s := runes.Plural(len(ns), "line ", "lines ") + strings.Join(parts, ", ")
	if len(ns) > memoryMaxListed {
		s += fmt.Sprintf(" and %d more", len(ns)-memoryMaxListed)
	}
	return s
}

// memoryError turns a store error into one a model can act on.
func memoryError(err error) error {
	var (
		tooLarge *memory.TooLargeError
		notReg   memory.NotRegularError
		pe       *os.PathError
		coded    *toolerr.Error
	)
	switch {
	case errors.As(err, &coded), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, memory.ErrEmpty):
		return toolerr.Errorf(toolerr.InvalidArguments, "Invalid parameters for tool 'memory': content is empty once line breaks and control characters are removed. Next: give the fact to remember as text.")
	case errors.Is(err, memory.ErrBusy):
		return toolerr.Errorf(toolerr.Busy, "%s is locked by another writer and stayed locked too long. Next: retry the write shortly.", memory.Path)
	case errors.As(err, &tooLarge):
		return toolerr.Errorf(toolerr.Unavailable, "%s is %s, more than the %s memory loads for search and read. Next: move older entries to another file (for example memory/archive.md) and search again; writes still work.",
			memory.Path, humanSize(tooLarge.Size), humanSize(tooLarge.Max))
	case errors.Is(err, syscall.ELOOP) && errors.As(err, &pe) && pe.Path == memory.Dir+"/"+memory.LockFile:
		return toolerr.Errorf(toolerr.PathDenied, "%s is a symbolic link; the memory lock file must be a plain file, and a link is never followed. Next: ask the user to remove it.", pe.Path)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return toolerr.Errorf(toolerr.ToolError, "the disk holding %s is full, so the entry was not saved (the file is as it was). Next: tell the user that disk space is needed; retry the write after it is freed.", memory.Path)
	case errors.As(err, &notReg):
		return toolerr.Errorf(toolerr.ToolError, "%s is not a regular file (a folder, pipe or device). Next: ask the user to move it aside; memory cannot be used until then.", memory.Path)
	}
	display := memory.Path
	if errors.As(err, &pe) && strings.HasPrefix(pe.Path, memory.Dir) {
		display = pe.Path
	}
	return workspace.Explain(err, workspace.Path{Name: display, Display: display})
}

var (
	_ registry.Tool  = (*Memory)(nil)
	_ registry.Ruled = (*Memory)(nil)
)
