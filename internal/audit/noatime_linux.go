package audit

import "golang.org/x/sys/unix"

// oNoATime keeps Verify's reads from updating each record's access time:
// on ext4 (relatime) the first read after a file is written would, which
// is a write to every inode of the log.
const oNoATime = unix.O_NOATIME
