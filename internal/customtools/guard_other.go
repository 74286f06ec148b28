//go:build !unix

package customtools

import "os"

// ownerError checks nothing here: Windows guards files with access
// control lists, not with an owner and mode bits as Unix does, and the
// service does not read those lists. Where the tools file lies is still
// checked (CheckPlace), as is what it names; protect the file and its
// folder with their ACLs so that only administrators and the service's
// account can change them.
func ownerError(path, p string, fi os.FileInfo) error { return nil }
