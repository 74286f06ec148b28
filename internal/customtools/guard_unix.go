//go:build unix

package customtools

import (
	"os"
	"syscall"
)

// ownerError refuses fi, found at p on the way to the tools file path
// (the file, a link to it, or a folder above either), when someone other
// than the service's user or root could change it: it belongs to another
// user, or it is writable by its group or by others. A folder writable by
// others with the sticky bit (/tmp) passes: no one but an entry's owner
// may then rename or remove it. ssh judges its configuration files so.
func ownerError(path, p string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	euid := os.Geteuid()
	what := "the file"
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		what = "the link"
	case fi.IsDir():
		what = "the folder"
	}
	if uid := int(st.Uid); uid != 0 && uid != euid {
		return refused("%s=%s: %s %s belongs to uid %d, neither the service's user (uid %d) nor root, so that user could change the tools. "+
			"Give it to root or to the service's user (chown %d %s), or move the tools file where only they can write", FileSetting, path, what, p, uid, euid, euid, p)
	}
	perm := fi.Mode().Perm()
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		// A link's own mode means nothing; its folder is checked.
	case perm&0o022 == 0:
	case fi.IsDir() && fi.Mode()&os.ModeSticky != 0:
	default:
		return refused("%s=%s: %s %s is writable by its group or by others (mode %04o), so they could change the tools. "+
			"Remove their write permission (chmod go-w %s)", FileSetting, path, what, p, perm, p)
	}
	return nil
}
