//go:build !unix

package skills

import "errors"

// mkfifo fails: there are no named pipes in the file system here.
func mkfifo(string, uint32) error { return errors.New("no FIFOs on this system") }
