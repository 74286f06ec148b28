// Package pathx compares file paths by their text, for the places that
// need to know whether one folder holds another (the workspace, the
// sandbox's mounts, the configured folders) without touching the disk.
package pathx

import (
	"path/filepath"
	"strings"
)

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
