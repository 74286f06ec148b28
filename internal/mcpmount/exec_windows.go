package mcpmount

import (
	"errors"
	"os"
)

// executable reports why p cannot be run: missing or a folder (Windows
// has no execute bit).
func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return errors.New("not found")
	case fi.IsDir():
		return errors.New("is a folder, not a program")
	}
	return nil
}
