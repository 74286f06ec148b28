//go:build unix

package homedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkParents checks every folder from dir (symbolic links resolved) up
// to the root: each must belong to root, the service or the account
// commands run as, and must not be writable by others unless it has the
// sticky bit (as /tmp has), so that nobody else can rename the HOME folder
// away and put another in its place.
func checkParents(dir string, user *User) error {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: d, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("%s, a parent of the HOME folder, is not a folder", d)
		}
		if !trusted(st.Uid, user) {
			return fmt.Errorf("%s, a parent of the HOME folder, belongs to uid %d, who could replace the HOME folder; put it in a folder of the service's own", d, st.Uid)
		}
		if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
			return fmt.Errorf("%s, a parent of the HOME folder, is writable by others (mode %04o) without the sticky bit, so anyone could replace the HOME folder; put it in a folder of the service's own", d, st.Mode&0o7777)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// trusted reports whether uid is root, the service or the account
// commands run as (which can write the HOME anyway).
func trusted(uid uint32, user *User) bool {
	return uid == 0 || int(uid) == os.Geteuid() || (user != nil && uid == user.Uid)
}

// checkHome opens path without following a symbolic link and checks what
// was opened: a folder, owned by the account commands run as, writable by
// nobody else. A folder the service just created is first given to that
// account; one that was there before keeps its owner unless that is the
// service's own (root, preparing it for TOOLSVC_EXEC_USER).
func checkHome(path string, user *User, created bool) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		switch {
		case unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return fmt.Errorf("%s is a symbolic link; HOME must be a real folder: remove the link and let toolsvc create the folder", path)
		case errors.Is(err, unix.ENOTDIR):
			return fmt.Errorf("%s is not a folder: remove it and let toolsvc create the folder", path)
		}
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	want := uint32(os.Geteuid())
	if user != nil {
		want = user.Uid
		if st.Uid != want && (created || st.Uid == uint32(os.Geteuid())) {
			if err := unix.Fchown(fd, int(user.Uid), int(user.Gid)); err != nil {
				return &os.PathError{Op: "chown", Path: path, Err: err}
			}
			st.Uid = want
		}
	}
	if st.Uid != want {
		return fmt.Errorf("%s already exists and belongs to uid %d, not to uid %d who runs the commands: someone else may have planted files in it. Remove it and let toolsvc create the folder, or name another", path, st.Uid, want)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %04o): anyone could plant files that commands run. Remove it and let toolsvc create the folder, or chmod go-w it after checking its content", path, st.Mode&0o7777)
	}
	return nil
}
