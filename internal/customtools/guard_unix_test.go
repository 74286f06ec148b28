//go:build unix

package customtools

import (
	"os"
	"path/filepath"
	"testing"
)

// nobody is the uid the tests give files that belong to someone else.
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user (chown) needs root; the CI runs this test as root")
	}
}

// privateDir is a folder of the test's own, mode 0700, below folders
// that pass the checks (t.TempDir's, under the sticky /tmp).
func privateDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(resolvedTempDir(t), "conf")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLoadRefusesFileOthersCanWrite: a tools file writable by group or
// others, or in a folder they can write, is refused with the chmod that
// mends it; a folder with the sticky bit passes.
func TestLoadRefusesFileOthersCanWrite(t *testing.T) {
	for _, mode := range []os.FileMode{0o666, 0o620, 0o602} {
		p := writeFile(t, filepath.Join(privateDir(t), "tools.yaml"), goodFile)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p, Options{})
		wantRefused(t, err, "TOOLSVC_TOOLS_FILE="+p, "the file "+p+" is writable by its group or by others", "chmod go-w "+p)
	}

	dir := privateDir(t)
	p := writeFile(t, filepath.Join(dir, "tools.yaml"), goodFile)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, Options{})
	wantRefused(t, err, "the folder "+dir+" is writable by its group or by others (mode 0777)")

	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, Options{}); err != nil {
		t.Errorf("a file in a sticky folder, as /tmp: %v", err)
	}

	// A folder far above the file counts too.
	top := privateDir(t)
	deep := writeFile(t, filepath.Join(top, "a", "b", "tools.yaml"), goodFile)
	if err := os.Chmod(top, 0o770); err != nil {
		t.Fatal(err)
	}
	_, err = Load(deep, Options{})
	wantRefused(t, err, "the folder "+top+" is writable")

	ok := writeFile(t, filepath.Join(privateDir(t), "tools.yaml"), goodFile)
	if err := os.Chmod(ok, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ok, Options{}); err != nil {
		t.Errorf("a 0644 file of the service's user: %v", err)
	}
}

// TestLoadRefusesFileOfAnotherUser: a tools file, a folder above it or a
// link to it that belongs to a user other than the service's or root is
// refused, naming the uid and the chown that mends it.
func TestLoadRefusesFileOfAnotherUser(t *testing.T) {
	needRoot(t)
	p := writeFile(t, filepath.Join(privateDir(t), "tools.yaml"), goodFile)
	if err := os.Chown(p, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, Options{})
	wantRefused(t, err, "TOOLSVC_TOOLS_FILE="+p, "the file "+p+" belongs to uid 65534", "chown 0 "+p)

	dir := privateDir(t)
	p = writeFile(t, filepath.Join(dir, "tools.yaml"), goodFile)
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	_, err = Load(p, Options{})
	wantRefused(t, err, "the folder "+dir+" belongs to uid 65534")

	dir = privateDir(t)
	real := writeFile(t, filepath.Join(dir, "real.yaml"), goodFile)
	link := symlink(t, real, filepath.Join(dir, "tools.yaml"))
	if err := os.Lchown(link, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	_, err = Load(link, Options{})
	wantRefused(t, err, "the link "+link+" belongs to uid 65534")
	if _, err := Load(real, Options{}); err != nil {
		t.Errorf("root's own file: %v", err)
	}
}

// TestLoadRefusesNonRegularFile: a folder is not a tools file.
func TestLoadRefusesNonRegularFile(t *testing.T) {
	dir := privateDir(t)
	_, err := Load(dir, Options{})
	wantRefused(t, err, "is not a regular file")
}
