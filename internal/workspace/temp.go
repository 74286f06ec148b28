package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

// tempShared returns a temporary name in TempDir, making the folder, or
// making it again, if needed (see ensureTemp). It fails when TempDir
// cannot be a folder, and WriteFile then works beside the target.
func (w *Workspace) tempShared(root *os.Root) (string, error) {
	if err := w.ensureTemp(root); err != nil {
		return "", err
	}
	return TempDir + "/.w.tmp-" + randomHex(), nil
}

// ensureTemp makes sure TempDir is a real folder at the top of root. The
// workspace belongs to the commands exec runs and to whoever else writes
// there, so anything may have taken the folder's place: a file, or a
// symbolic link (to "/", say). Whatever is there that is not a folder is
// removed as it is, a link as a link, never followed (os.Root removes the
// name with unlinkat, inside the workspace), and the folder is made again,
// with a warning. This runs at start-up, on reopening a replaced
// workspace, before each write that needs the folder and from the
// readiness check, so the service recovers without a restart.
func (w *Workspace) ensureTemp(root *os.Root) error {
	if fi, err := root.Lstat(TempDir); err == nil && fi.IsDir() {
		return nil
	}
	w.healMu.Lock()
	defer w.healMu.Unlock()
	replaced, err := healTemp(root)
	if replaced != "" && w.warn != nil {
		w.warn(fmt.Sprintf("the workspace's temporary folder %s had been replaced by %s (by a command or by hand); "+
			"it was removed without being followed, and the folder made again", TempDir, replaced))
	}
	return err
}

// repairTemp puts TempDir back as a folder when something else took its
// place, and leaves a workspace without one as it is (the first write
// makes it). A failure is left for Probe (/readyz) to report.
func (w *Workspace) repairTemp(root *os.Root) {
	if _, err := root.Lstat(TempDir); err == nil {
		_ = w.ensureTemp(root)
	}
}

// healTemp makes TempDir a folder again, and says what it removed to do
// so ("" for nothing).
func healTemp(root *os.Root) (replaced string, err error) {
	fi, err := root.Lstat(TempDir)
	switch {
	case err == nil && fi.IsDir():
		return "", nil
	case err == nil:
		replaced = describeEntry(fi)
		// A name that is not a folder: unlinkat removes a link itself.
		// Should a folder have appeared meanwhile, only an empty one is
		// removed, and it is made again below.
		if err := root.Remove(TempDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return replaced, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	if err := root.Mkdir(TempDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return replaced, err
	}
	if fi, err = root.Lstat(TempDir); err != nil {
		return replaced, err
	}
	if !fi.IsDir() {
		return replaced, errors.New("not a folder")
	}
	return replaced, nil
}

// describeEntry names what fi is, for the warning.
func describeEntry(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsRegular():
		return fmt.Sprintf("a file of %d bytes", fi.Size())
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
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
// TempDir, which is made a folder again first if something took its
// place, and removed. The error says what failed, without host paths.
func (w *Workspace) Probe() error {
	root, err := w.Current()
	if err != nil {
		return errors.New("missing: the folder was deleted, moved or unmounted")
	}
	tmp, err := w.tempShared(root)
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
