// Package npmtest gives tests programs from npm that nobody here wrote
// (validators, client libraries), at pinned versions, installed once into
// a cache folder reused between runs.
package npmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

var (
	mu        sync.Mutex
	installed = map[string]string{} // key: the packages; value: node_modules
)

// Install installs packages (name@version each) once into a cache folder
// keyed by them and returns its node_modules. Without node and npm the
// test is skipped, except under CI (CI=true), where it fails: the peers
// must be tested there (scripts/test.sh installs Node.js and npm).
func Install(t testing.TB, packages ...string) string {
	t.Helper()
	for _, p := range []string{"node", "npm"} {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing under CI: install Debian's nodejs and npm (scripts/test.sh does)", p)
			}
			t.Skipf("NOT TESTED against %v: %s is not installed", packages, p)
		}
	}
	key := strings.Join(packages, "+")
	mu.Lock()
	defer mu.Unlock()
	if nm, ok := installed[key]; ok {
		return nm
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	root := filepath.Join(base, "toolsvc-test-npm")
	d := filepath.Join(root, strings.NewReplacer("@", "", "/", "-", ".", "_").Replace(key))
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// Test runs in other processes (two go test commands, several
	// packages) share the folder: one installs while the others wait, so
	// that none reads or writes a half-made tree.
	lock := flock.New(d + ".lock")
	if err := lock.Lock(); err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if _, err := os.Stat(filepath.Join(d, marker)); err != nil {
		install(t, d, packages)
	}
	nm := filepath.Join(d, "node_modules")
	installed[key] = nm
	return nm
}

// marker names the file that says a folder holds a complete install,
// checked by npm ls (folders installed before that check lack it).
const marker = "installed-checked"

// install installs packages into a fresh folder and puts it in d's place:
// an install that failed half-way (killed, out of disk, a network error)
// leaves a tree npm cannot repair, so it is never reused.
func install(t testing.TB, d string, packages []string) {
	t.Helper()
	tmp, err := os.MkdirTemp(filepath.Dir(d), filepath.Base(d)+".new-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	args := append([]string{"install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save", "--loglevel", "error"}, packages...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "npm", args...).CombinedOutput(); err != nil {
		t.Fatalf("npm install %v: %v: %s", packages, err, out)
	}
	// npm can report success over a tree two installs wrote at once;
	// npm ls checks that every dependency is there.
	if out, err := exec.CommandContext(ctx, "npm", "ls", "--all", "--prefix", tmp).CombinedOutput(); err != nil {
		t.Fatalf("npm install %v left missing or broken dependencies: %v: %s", packages, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, marker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(d); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, d); err != nil {
		t.Fatal(err)
	}
}
