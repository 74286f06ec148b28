package pkgcache

import "github.com/countbot/toolsvc/internal/homedir"

// traversable does nothing: Windows has no TOOLSVC_EXEC_USER, and guards
// folders with access control lists rather than mode bits.
func traversable(string, *homedir.User) error { return nil }
