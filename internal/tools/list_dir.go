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
	"github.com/countbot/toolsvc/internal/workspace"
)

// countBeyond is how many entries past the cap list_dir still counts for
// its "N more" note before it stops looking.
const countBeyond = 100000

// ListDir lists a folder, optionally recursively.
type ListDir struct {
	ws         *workspace.Workspace
	maxEntries int
}

// NewListDir returns list_dir, which shows at most maxEntries entries.
func NewListDir(ws *workspace.Workspace, maxEntries int) *ListDir {
	return &ListDir{ws: ws, maxEntries: maxEntries}
}

const listDirSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "maxLength": 4096, "description": "Folder relative to the workspace (default: the workspace root)"},
    "recursive": {"type": "boolean", "description": "Also list everything below the folder (default false); symbolic links are shown, not followed"}
  },
  "additionalProperties": false
}`

type listDirArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

func (t *ListDir) Name() string { return "list_dir" }

func (t *ListDir) Description() string {
	return "List a folder in the workspace: one entry per line with its type ([DIR], [FILE] with size, [LINK] with target). " +
		"recursive=true lists everything below it. Long listings are cut with a count of what was left out; use file_search to find files by name."
}

func (t *ListDir) Parameters() json.RawMessage { return json.RawMessage(listDirSchema) }

func (t *ListDir) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := registry.Decode[listDirArgs](raw)
	if err != nil {
		return "", err
	}
	p, err := t.ws.ResolveDir(args.Path, "use read_file to read it.")
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
	stopped    bool // counting stopped at countBeyond
	unreadable int
}

// walk lists dir (shown with the prefix rel) depth first, in name order.
// Symbolic links are listed with their target and never followed.
func (l *lister) walk(dir workspace.Path, rel string) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	entries, err := readDir(dir)
	if err != nil {
		if rel == "" {
			return err
		}
		l.unreadable++
		return nil
	}
	for _, e := range entries {
		if l.stopped {
			return nil
		}
		name := path.Join(rel, e.Name())
		if len(l.lines) >= l.max {
			l.more++
			if l.more >= countBeyond {
				l.stopped = true
				return nil
			}
		} else {
			l.lines = append(l.lines, l.describe(dir, e, name))
		}
		if l.recursive && e.IsDir() {
			if err := l.walk(dir.Join(e.Name()), name); err != nil {
				return err
			}
		}
	}
	return nil
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

// readDir returns a folder's entries sorted by name, without following
// symbolic links.
func readDir(dir workspace.Path) ([]os.DirEntry, error) {
	f, err := dir.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []os.DirEntry
	for {
		batch, err := f.ReadDir(1024)
		all = append(all, batch...)
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return nil, workspace.Explain(err, dir)
		}
	}
	slices.SortFunc(all, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return all, nil
}

var _ registry.Tool = (*ListDir)(nil)
