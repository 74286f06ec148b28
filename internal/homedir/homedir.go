// Package homedir prepares the folder that exec's commands keep as their
// HOME between calls (TOOLSVC_EXEC_HOME). Programs run files they find
// there (a shell's rc files, Python's usercustomize.py, git's .gitconfig
// hooks and aliases), so the folder must be one nobody else could have
// planted files in: the service creates it itself, private to the account
// commands run as, and refuses a folder that already exists with another
// owner, with group or world write permission, or as a symbolic link, and
// one whose parent folders someone else could swap it out of.
package homedir

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// User is the account commands run as, when it is not the service's own.
type User struct {
	Uid, Gid uint32
}

// Prepare creates dir (mode 0700, owned by user, or by the service when
// user is nil) if it is missing, and checks it and its parents. It returns
// the folder's absolute path with the parents' symbolic links resolved.
// Missing parents are created (mode 0755). The error says what is wrong and
// what to do, naming the folder.
func Prepare(dir string, user *User) (string, error) {
	if dir == "" {
		return "", errors.New("no folder given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	base := filepath.Base(abs)
	if base == string(filepath.Separator) || base == "." || base == ".." {
		return "", fmt.Errorf("%s cannot be a HOME folder: name a folder of its own", dir)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", err
	}
	// The parents' links are resolved, and the real folders then checked;
	// the last part is never followed.
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	if err := checkParents(parent, user); err != nil {
		return "", err
	}
	path := filepath.Join(parent, base)
	created := false
	if err := os.Mkdir(path, 0o700); err == nil {
		created = true
	} else if !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := checkHome(path, user, created); err != nil {
		return "", err
	}
	return path, nil
}

// ForFolder prepares, as Prepare does, the HOME that a key's own folder
// keeps below the shared HOME home. folder is the key's folder relative
// to the workspace (slash-separated, such as "tenants/alice"); its HOME
// is named after it with its slashes escaped (tenants%2Falice), so that
// no two folders share one. Everything the service runs for that folder
// (exec's commands, the key's own instance of an MCP server) gets the
// same HOME, and nothing run for another folder reaches it: a HOME
// shared between keys would let one plant files (a shell's rc file, a
// git hook) that another's programs run. Every "%" in the name is
// followed by two hex digits, so a name that breaks that rule
// ("%mcp-listing") is free for a HOME that belongs to no folder.
func ForFolder(home, folder string, user *User) (string, error) {
	name := url.PathEscape(folder)
	if name == "" || name == "." || name == ".." {
		return "", fmt.Errorf("the folder %q cannot name a HOME of its own", folder)
	}
	return Prepare(filepath.Join(home, name), user)
}
