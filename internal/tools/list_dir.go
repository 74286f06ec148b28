package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/workspace"
)

// countBeyond is how many entries past the cap list_dir still counts for
// its "N more" note before it stops looking.
const countBeyond = 100000

// ListDir lists a folder, optionally recursively.
type ListDir struct {
	tooldef.Def[listDirArgs]
	ws         *workspace.Workspace
	maxEntries int
}

type listDirArgs struct {
	Path      string `json:"path,omitempty" jsonschema:"Folder relative to the workspace (default: the workspace root)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"Also list everything below the folder (default false); symbolic links are shown, not followed"`
}

// NewListDir returns list_dir, which shows at most maxEntries entries. The
// schema states the path bound the workspace enforces.
func NewListDir(ws *workspace.Workspace, maxEntries int) *ListDir {
	def := tooldef.New[listDirArgs]("list_dir",
		"List a folder in the workspace: one entry per line with its type ([DIR], [FILE] with size, [LINK] with target). "+
			"recursive=true lists everything below it. Long listings are cut with a count of what was left out; use file_search to find files by name.",
		func(p tooldef.Prop) {
			p.Prop("path").MaxLength(workspace.MaxPathLen)
		},
		tooldef.Sample(listDirArgs{}),
		tooldef.Title("List folder"), tooldef.Hints(tooldef.ReadOnly, tooldef.Idempotent))
	return &ListDir{Def: def, ws: ws, maxEntries: maxEntries}
}

func (t *ListDir) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return "", err
	}
	p, err := ws.ResolveDir(args.Path, "use read_file to read it.")
	if err != nil {
		return "", err
	}

	l := lister{ctx: ctx, max: t.maxEntries, recursive: args.Recursive}
	if err := l.walk(p, ""); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Directory: %s", p.Display)
	if args.Recursive {
		b.WriteString(" (recursive)")
	}
	b.WriteByte('\n')
	if len(l.lines) == 0 {
		b.WriteString("(empty folder)")
		return b.String(), nil
	}
	b.WriteString(strings.Join(l.lines, "\n"))
	if l.more > 0 {
		more := fmt.Sprint(l.more)
		if l.stopped {
			more = "at least " + more
		}
		fmt.Fprintf(&b, "\n... %s more entries not shown (the limit is %d). Next: list a subfolder, or use file_search with a pattern.", more, t.maxEntries)
	}
	if l.unreadable > 0 {
		fmt.Fprintf(&b, "\n(%d folders could not be read)", l.unreadable)
	}
	return b.String(), nil
}

type lister struct {
	ctx        context.Context
	max        int
	recursive  bool
	lines      []string
	more       int
	stopped    bool // a subtree was left uncounted: counting stopped at countBeyond
	unreadable int
}

// walk lists dir (shown with the prefix rel) depth first, in name order.
// Symbolic links are listed with their target and never followed.
//
// Memory is bounded by the output cap, not by the folder: a folder is read
// in batches, and only the entries that can still be shown (the first ones
// by name, as many as the cap leaves) are kept, in a heap; the others are
// only counted. So a folder of a million entries costs a few hundred kept
// entries and one batch, plus the time to read it.
func (l *lister) walk(dir workspace.Path, rel string) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	kept, err := l.read(dir, l.max-len(l.lines))
	if err != nil {
		if rel == "" {
			return err
		}
		l.unreadable++
		return nil
	}
	for _, e := range kept {
		if len(l.lines) >= l.max {
			// Subfolders listed before it used up the cap.
			l.count(dir, e)
			continue
		}
		name := path.Join(rel, e.Name())
		l.lines = append(l.lines, l.describe(dir, e, name))
		if l.recursive && e.IsDir() {
			if err := l.walk(dir.Join(e.Name()), name); err != nil {
				return err
			}
		}
	}
	return nil
}

// read returns, sorted by name, the first keep entries of dir, and counts
// the others (with their subtrees when recursive). Temporary files of
// writes are left out (workspace.IsTemp).
func (l *lister) read(dir workspace.Path, keep int) ([]os.DirEntry, error) {
	f, err := dir.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := entryHeap{}
	for {
		if err := l.ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := f.ReadDir(256)
		for _, e := range batch {
			if workspace.IsTemp(e.Name()) {
				continue
			}
			if keep <= 0 {
				l.count(dir, e)
				continue
			}
			if out, ok := h.push(e, keep); ok {
				l.count(dir, out)
			}
		}
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return nil, workspace.Explain(err, dir)
		}
	}
	kept := []os.DirEntry(h)
	slices.SortFunc(kept, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return kept, nil
}

// count counts e, which is not shown, and, when listing recursively, what
// lies below it, until countBeyond entries have been counted.
func (l *lister) count(dir workspace.Path, e os.DirEntry) {
	l.more++
	if !l.recursive || !e.IsDir() {
		return
	}
	if l.more >= countBeyond || l.ctx.Err() != nil {
		l.stopped = true
		return
	}
	sub := dir.Join(e.Name())
	f, err := sub.Open()
	if err != nil {
		l.unreadable++
		return
	}
	defer f.Close()
	for {
		batch, err := f.ReadDir(256)
		for _, c := range batch {
			if l.more >= countBeyond {
				l.stopped = true
				return
			}
			if !workspace.IsTemp(c.Name()) {
				l.count(sub, c)
			}
		}
		if err != nil || len(batch) == 0 {
			return
		}
	}
}

// entryHeap is a max-heap of entries by name: the root is the last by name
// of those kept.
type entryHeap []os.DirEntry

// push adds e, keeping at most k entries; when one has to go (e itself or
// the last kept), it is returned with ok true.
func (h *entryHeap) push(e os.DirEntry, k int) (out os.DirEntry, ok bool) {
	if len(*h) == k {
		if e.Name() > (*h)[0].Name() {
			return e, true
		}
		out, (*h)[0] = (*h)[0], e
		h.down(0)
		return out, true
	}
	*h = append(*h, e)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if (*h)[p].Name() >= (*h)[i].Name() {
			break
		}
		(*h)[p], (*h)[i] = (*h)[i], (*h)[p]
		i = p
	}
	return nil, false
}

func (h entryHeap) down(i int) {
	for {
		big, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].Name() > h[big].Name() {
			big = l
		}
		if r < len(h) && h[r].Name() > h[big].Name() {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

func (l *lister) describe(dir workspace.Path, e fs.DirEntry, name string) string {
	switch {
	case e.IsDir():
		return "[DIR]  " + name + "/"
	case e.Type()&fs.ModeSymlink != 0:
		target, err := dir.Root.Readlink(path.Join(dir.Name, e.Name()))
		if err != nil {
			return "[LINK] " + name
		}
		return "[LINK] " + name + " -> " + target
	case e.Type().IsRegular():
		if fi, err := e.Info(); err == nil {
			return fmt.Sprintf("[FILE] %s (%s)", name, humanSize(fi.Size()))
		}
		return "[FILE] " + name
	default:
		return "[OTHER] " + name
	}
}

var _ registry.Tool = (*ListDir)(nil)
