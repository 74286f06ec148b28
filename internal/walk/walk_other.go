//go:build !linux

package walk

import (
	"context"
	"io/fs"
	"os"
)

// Walk reads every folder below root, which must be an open folder, and
// calls opt.Visit for each entry, from one goroutine (worker 0). It returns
// an error when the root itself cannot be read or ctx ends first
// (ctx.Err()); folders below the root that cannot be read are counted in
// Stats.Unreadable and the walk goes on. Folders are opened through an
// os.Root, so no path leaves the root, and an entry listed as a link is
// never entered.
func Walk(ctx context.Context, root *os.File, opt Options) (Stats, error) {
	var st Stats
	r, err := os.OpenRoot(root.Name())
	if err != nil {
		return st, err
	}
	defer r.Close()
	type job struct {
		rel   string
		depth int
	}
	stack := []job{{rel: "", depth: 0}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		entries, err := readDir(r, j.rel)
		if err != nil {
			if j.rel == "" {
				return st, err
			}
			st.Unreadable++
			continue
		}
		st.Dirs++
		descend := opt.MaxDepth < 0 || j.depth < opt.MaxDepth
		for _, e := range entries {
			name := []byte(e.Name())
			if isDots(name) {
				continue
			}
			st.Entries++
			if opt.Skip != nil && opt.Skip(name) {
				continue
			}
			kind := kindOfType(e.Type())
			opt.Visit(0, j.rel, name, kind)
			if kind == Dir && descend {
				rel := e.Name()
				if j.rel != "" {
					rel = j.rel + "/" + rel
				}
				stack = append(stack, job{rel: rel, depth: j.depth + 1})
			}
		}
	}
	return st, ctx.Err()
}

// readDir lists the folder rel ("" for the root) below r.
func readDir(r *os.Root, rel string) ([]fs.DirEntry, error) {
	if rel == "" {
		rel = "."
	}
	f, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// kindOfType maps a directory entry's type, which never follows a link.
func kindOfType(t fs.FileMode) Kind {
	switch {
	case t.IsRegular():
		return File
	case t.IsDir():
		return Dir
	case t&fs.ModeSymlink != 0:
		return Link
	}
	return Other
}
