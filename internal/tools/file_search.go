package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/walk"
	"github.com/countbot/toolsvc/internal/workspace"
)

// FileSearch finds files and folders by name below a folder of the
// workspace, with a parallel walk that never follows symbolic links.
type FileSearch struct {
	tooldef.Def[fileSearchArgs]
	ws      *workspace.Workspace
	workers int
	budget  time.Duration
}

// fileSearchArgs: the folder to search is always named.
type fileSearchArgs struct {
	Path     string   `json:"path" jsonschema:"Folder to search, relative to the workspace; '.' is the whole workspace"`
	Pattern  string   `json:"pattern,omitempty" jsonschema:"Name pattern, case-insensitive, matched against whole entry names: * any characters, ? one character, [abc] or [a-z] one of a set, [!a-z] one not in it. Examples: '*.py', 'test_*', '*config*'. Default '*'"`
	Type     string   `json:"type,omitempty" jsonschema:"file: regular files, dir: folders, all: everything, symbolic links included (default all)"`
	MaxDepth *int     `json:"max_depth,omitempty" jsonschema:"How deep to search: 0 only the folder's direct entries, 1 also those of its subfolders, ...; -1 unlimited (default -1)"`
	Limit    int      `json:"limit,omitempty"`
	Exclude  []string `json:"exclude,omitempty" jsonschema:"Name patterns of entries to skip with everything below them, e.g. [\"node_modules\", \".git\", \"*.min.js\"]"`
}

// Defaults of the optional arguments.
const (
	searchDefaultLimit = 20
	searchDefaultDepth = -1
	// searchMaxLimit is the largest limit a call may ask for.
	searchMaxLimit = 100
)

// NewFileSearch returns file_search. workers is how many folders it reads
// at once (0: one per CPU); after budget it stops and reports what it has
// found so far, marked partial. The schema states the path bound the
// workspace enforces and the limits the search applies.
func NewFileSearch(ws *workspace.Workspace, workers int, budget time.Duration) *FileSearch {
	def := tooldef.New[fileSearchArgs]("file_search",
		"Find files and folders by name below a folder of the workspace, in all its subfolders unless max_depth says otherwise. "+
			"pattern matches whole names, case-insensitively: * any characters, ? one character, [a-z] a set ('*.py', 'test_*', '*config*'). "+
			"type picks file, dir or all; exclude skips entries such as node_modules or .git with everything below them. "+
			"Returns the total number of matches and the first `limit` of them sorted by path: [FILE] path (size), [DIR] path, [LINK] path -> target. "+
			"Symbolic links are listed, never followed. Paths in the result are relative to the workspace and can be passed to read_file.",
		func(p tooldef.Prop) {
			p.Prop("path").MaxLength(workspace.MaxPathLen)
			p.Prop("pattern").MaxLength(255)
			p.Prop("type").Enum("file", "dir", "all")
			p.Prop("max_depth").Minimum(-1).Maximum(4096)
			p.Prop("limit").Minimum(1).Maximum(searchMaxLimit).
				Description(fmt.Sprintf("Matches to show, 1-%d (default %d); the total is always counted", searchMaxLimit, searchDefaultLimit))
			p.Prop("exclude").MaxItems(50).Items().MinLength(1).MaxLength(255)
		},
		tooldef.Sample(fileSearchArgs{Path: "."}),
		tooldef.Title("Search files"), tooldef.Hints(tooldef.ReadOnly, tooldef.Idempotent))
	return &FileSearch{Def: def, ws: ws, workers: workers, budget: budget}
}

// Timeout leaves the search its whole budget plus time to describe the
// matches it shows, so the budget, not the registry, cuts a long search and
// the model still gets what was found.
func (t *FileSearch) Timeout() time.Duration { return t.budget + 10*time.Second }

func (t *FileSearch) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	q, err := newSearchQuery(args)
	if err != nil {
		return "", err
	}
	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return "", err
	}
	p, err := ws.ResolveDir(args.Path, "give the folder to search in path and the name in pattern.")
	if err != nil {
		return "", err
	}
	// openDir (O_DIRECTORY): should the folder be swapped for a pipe
	// meanwhile, the open fails instead of blocking.
	root, err := p.Root.OpenFile(p.Name, os.O_RDONLY|openDir, 0)
	if err != nil {
		return "", workspace.Explain(err, p)
	}
	defer root.Close()

	n := walk.WorkerCount(t.workers)
	tops := make([]*walk.Top, n)
	for i := range tops {
		tops[i] = walk.NewTop(q.limit)
	}
	wctx, cancel := context.WithTimeout(ctx, t.budget)
	defer cancel()
	stats, err := walk.Walk(wctx, root, walk.Options{
		Workers:  n,
		MaxDepth: q.maxDepth,
		Skip:     q.skipper(),
		Visit: func(w int, dir string, name []byte, kind walk.Kind) {
			if q.wants(kind) && q.pattern.Match(name) {
				tops[w].Offer(dir, name, kind)
			}
		},
	})
	partial := false
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		partial = true
	default:
		return "", workspace.Explain(err, p)
	}
	total, first := walk.Merge(q.limit, tops...)
	return t.format(p, q, total, first, stats.Unreadable, partial), nil
}

// searchQuery is the validated form of the arguments.
type searchQuery struct {
	pattern  *walk.Pattern
	exclude  []*walk.Pattern
	kind     string
	maxDepth int
	limit    int
}

func newSearchQuery(a fileSearchArgs) (*searchQuery, error) {
	q := &searchQuery{kind: a.Type, maxDepth: searchDefaultDepth, limit: a.Limit}
	if q.kind == "" {
		q.kind = "all"
	}
	if a.MaxDepth != nil {
		q.maxDepth = *a.MaxDepth
	}
	if q.limit == 0 {
		q.limit = searchDefaultLimit
	}
	// The search is recursive already; accept the "**/*.go" habit of glob
	// tools as "*.go".
	pat := a.Pattern
	for strings.HasPrefix(pat, "**/") {
		pat = pat[3:]
	}
	if pat == "" || pat == "**" {
		pat = "*"
	}
	if strings.Contains(pat, "/") {
		return nil, toolerr.Errorf(toolerr.InvalidArguments, "pattern '%s' contains '/': patterns match entry names, not paths. Next: put the folder in path and the name pattern in pattern, e.g. path 'src', pattern '*.go'.", runes.Shorten(a.Pattern, runes.Echo))
	}
	var err error
	if q.pattern, err = walk.Compile(pat); err != nil {
		return nil, toolerr.Errorf(toolerr.InvalidArguments, "pattern '%s' is not valid (%w). Next: close every '[' with ']', and write '\\' before a literal *, ? or [.", runes.Shorten(a.Pattern, runes.Echo), err)
	}
	for _, e := range a.Exclude {
		if strings.Contains(e, "/") {
			return nil, toolerr.Errorf(toolerr.InvalidArguments, "exclude '%s' contains '/': exclude patterns match entry names, not paths. Next: give the name alone, such as 'node_modules'.", runes.Shorten(e, runes.Echo))
		}
		ep, err := walk.Compile(e)
		if err != nil {
			return nil, toolerr.Errorf(toolerr.InvalidArguments, "exclude pattern '%s' is not valid (%w). Next: close every '[' with ']'.", runes.Shorten(e, runes.Echo), err)
		}
		q.exclude = append(q.exclude, ep)
	}
	return q, nil
}

// skipper returns the walk's Skip function: whether an entry is excluded,
// with its subtree. Nil when nothing is, to save a call per entry.
// Temporary files of writes (in progress or left by a crash) and their
// folder are never shown: see workspace.IsTemp.
func (q *searchQuery) skipper() func(name []byte) bool {
	return func(name []byte) bool {
		if workspace.IsTemp(name) {
			return true
		}
		for _, e := range q.exclude {
			if e.Match(name) {
				return true
			}
		}
		return false
	}
}

// wants reports whether entries of this kind are asked for. Symbolic links
// and special files are neither files nor folders: only type=all lists them,
// since telling what a link points to would mean following it.
func (q *searchQuery) wants(k walk.Kind) bool {
	switch q.kind {
	case "file":
		return k == walk.File
	case "dir":
		return k == walk.Dir
	}
	return true
}

func (t *FileSearch) format(p workspace.Path, q *searchQuery, total int, first []walk.Match, unreadable int, partial bool) string {
	var b strings.Builder
	count := fmt.Sprint(total)
	if partial {
		count = "at least " + count
	}
	fmt.Fprintf(&b, "Found %s file(s) matching '%s' in: %s", count, q.pattern, p.Display)
	if total == 0 && !partial {
		b.WriteString("\nNext: patterns match whole names, ignoring case; use '*part*' to match part of a name, and check path, type, max_depth and exclude.")
	}
	if total > len(first) {
		fmt.Fprintf(&b, "\nOnly the first %d (sorted by path) are shown. Next: narrow the search with a more specific pattern, a subfolder as path, type, max_depth or exclude, or raise limit (at most %d).", len(first), searchMaxLimit)
	}
	for _, m := range first {
		b.WriteByte('\n')
		b.WriteString(t.describe(p, m))
	}
	if unreadable > 0 {
		fmt.Fprintf(&b, "\nNote: %d folders could not be read (no permission, or removed during the search); their contents are not included.", unreadable)
	}
	if partial {
		fmt.Fprintf(&b, "\nNote: the search stopped after %s before it covered the whole folder, so the results are partial. Next: search a subfolder, or use max_depth or exclude to skip large folders.", t.budget)
	}
	return b.String()
}

// describe formats one match. Sizes and link targets are looked up only
// for the matches shown, through the workspace's root, never following a
// link.
func (t *FileSearch) describe(p workspace.Path, m walk.Match) string {
	name := path.Join(p.Name, m.Path)
	display := m.Path
	if p.Display != "." {
		display = path.Join(p.Display, m.Path)
	}
	switch m.Kind {
	case walk.Dir:
		return "[DIR] " + display
	case walk.Link:
		if target, err := p.Root.Readlink(name); err == nil {
			return "[LINK] " + display + " -> " + target
		}
		return "[LINK] " + display
	case walk.File:
		if fi, err := p.Root.Lstat(name); err == nil {
			return fmt.Sprintf("[FILE] %s (%s)", display, humanSize(fi.Size()))
		}
		return "[FILE] " + display
	}
	return "[OTHER] " + display
}

var (
	_ registry.Tool      = (*FileSearch)(nil)
	_ registry.Timeouter = (*FileSearch)(nil)
)
