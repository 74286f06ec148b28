package mcpmount

import (
	"errors"
	"os"
	"runtime"
)

// executable reports why p cannot be run: missing, a folder, or without
// an execute bit (which Windows does not have).
func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return errors.New("not found")
	case fi.IsDir():
		return errors.New("is a folder, not a program")
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
		return errors.New("is not executable")
	}
	return nil
}
