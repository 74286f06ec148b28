//go:build !unix

package workspace

import (
	"context"
	"os"
)

// LocksEdits is false here: Windows cannot replace a file another handle
// holds open, so an editor closes the file before it writes, and two edits
// of one file at the same moment may keep only the later one's change.
const LocksEdits = false

// OpenForEdit opens the file at p for reading; release closes it.
func (p Path) OpenForEdit(context.Context) (f *os.File, release func(), err error) {
	f, err = p.Open()
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}
