package homedir

import (
	"fmt"
	"os"
)

// checkParents does nothing: Windows guards folders with access control
// lists, not owners and mode bits, and a folder's creator keeps control of
// it unless its parent's list says otherwise.
func checkParents(string, *User) error { return nil }

// checkHome checks that path is a real folder, not a symbolic link or
// junction that would lead the commands' HOME elsewhere.
func checkHome(path string, _ *User, _ bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&(os.ModeSymlink|os.ModeIrregular) != 0:
		return fmt.Errorf("%s is a symbolic link or junction; HOME must be a real folder: remove it and let toolsvc create the folder", path)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder: remove it and let toolsvc create the folder", path)
	}
	return nil
}
