// Package pathx compares file paths by their text, for the places that
// need to know whether one folder holds another (the workspace, the
// sandbox's mounts, the configured folders) without touching the disk,
// and takes host paths out of errors that leave the service.
package pathx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// StripPath returns the error inside an *os.PathError in err's chain, and
// err itself when there is none: the path names a place on the host (or
// /proc/self/fd/N) that means nothing to a model or a /readyz client and
// may tell them more than they should know.
func StripPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Rel returns p relative to dir, with forward slashes ("." for dir itself),
// and whether p is dir or lies below it. Both must be clean absolute paths
// of this system; links are not resolved, so resolve them first where a
// link could lead elsewhere. Unlike filepath.Rel it never climbs with "..":
// "/a/bc" is not below "/a/b".
func Rel(dir, p string) (string, bool) {
	if p == dir {
		return ".", true
	}
	prefix := dir
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if !strings.HasPrefix(p, prefix) {
		return "", false
	}
	return filepath.ToSlash(p[len(prefix):]), true
}

// Contains reports whether p is dir or lies below it, as Rel does.
func Contains(dir, p string) bool {
	_, ok := Rel(dir, p)
	return ok
}
