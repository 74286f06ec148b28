package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
)

// TempDir is the folder, at the top of the workspace, where WriteFile makes
// its temporary files before renaming them into place. Keeping them in one
// folder makes the leftovers of interrupted writes cheap to find: Open (and
// a reopen of a replaced workspace) reads this one folder instead of
// walking a workspace that may hold millions of files. list_dir and
// file_search never show it.
const TempDir = ".toolsvc-tmp"

// tempSuffixLen is the length of the random part of a temporary name.
const tempSuffixLen = 12

// maxTempBase bounds the part of the target's name kept in a temporary
// name beside it, so the temporary name stays within NAME_MAX (255 bytes).
const maxTempBase = 200

// IsTemp reports whether an entry's name is one WriteFile gives temporary
// files or their folder: TempDir itself, or ".<name>.tmp-<12 hex digits>"
// for the files made beside their target. Listings hide these names: they
// are either a write in progress or the leftover of an interrupted one.
func IsTemp[T string | []byte](name T) bool {
	if string(name) == TempDir {
		return true
	}
	n := len(name)
	const tag = ".tmp-"
	if n < 1+len(tag)+tempSuffixLen || name[0] != '.' || string(name[n-tempSuffixLen-len(tag):n-tempSuffixLen]) != tag {
		return false
	}
	for _, c := range []byte(name[n-tempSuffixLen:]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func randomHex() string {
	var rnd [tempSuffixLen / 2]byte
	_, _ = rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// tempBeside returns a temporary name in the folder of name.
func tempBeside(name string) string {
	base := path.Base(name)
	if len(base) > maxTempBase {
		base = strings.ToValidUTF8(base[:maxTempBase], "")
	}
	return path.Join(path.Dir(name), "."+base+".tmp-"+randomHex())
}

// tempShared returns a temporary name in TempDir, creating the folder if
// needed. It fails when TempDir cannot be a folder (something else was put
// in its place), and WriteFile then works beside the target.
func tempShared(root *os.Root) (string, error) {
	if err := root.Mkdir(TempDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := root.Lstat(TempDir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", errors.New("not a folder")
	}
	return TempDir + "/.w.tmp-" + randomHex(), nil
}

// removeStaleTemps deletes the files in TempDir that no write is using:
// those a crash left behind. A write in progress (in this process or
// another sharing the workspace) holds a lock on its file, which is
// skipped. The folder is read in bounded batches; the work is proportional
// to the leftovers, not to the size of the workspace. Files a crash left
// beside their targets (writes to other file systems mounted inside the
// workspace) are not looked for, which would need a walk of the whole
// workspace; listings hide them all the same.
func removeStaleTemps(root *os.Root) {
	d, err := root.Open(TempDir)
	if err != nil {
		return
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if !IsTemp(name) {
				continue
			}
			rel := TempDir + "/" + name
			f, err := root.OpenFile(rel, os.O_RDONLY, 0)
			if err != nil {
				continue
			}
			if unlock, ok := tryLockTemp(f); ok {
				_ = root.Remove(rel)
				unlock()
			}
			f.Close()
		}
		if err != nil || len(names) == 0 {
			return
		}
	}
}

// Probe checks that the workspace folder is there (reopening it if it was
// replaced) and that a file can be made in it: a file is created in
// TempDir and removed. The error says what failed, without host paths.
func (w *Workspace) Probe() error {
	root, err := w.Current()
	if err != nil {
		return errors.New("missing: the folder was deleted, moved or unmounted")
	}
	tmp, err := tempShared(root)
	if err == nil {
		var f *os.File
		if f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			err = f.Close()
			if rerr := root.Remove(tmp); err == nil {
				err = rerr
			}
		}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return errors.New("not writable: " + err.Error())
	}
	return nil
}
