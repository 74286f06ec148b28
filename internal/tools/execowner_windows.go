package tools

import "os"

// openDir is zero: Windows has no O_DIRECTORY, and no FIFOs to block on.
const openDir = 0

// ownerOther reports false: a file's owner is not in its FileInfo here,
// and the default HOME is below the user's own temporary folder.
func ownerOther(os.FileInfo, int) (owner uint32, other bool) { return 0, false }
