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
	d := filepath.Join(base, "toolsvc-test-npm", strings.NewReplacer("@", "", "/", "-", ".", "_").Replace(key))
	marker := filepath.Join(d, "installed")
	if _, err := os.Stat(marker); err != nil {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"install", "--prefix", d, "--no-audit", "--no-fund", "--no-save", "--loglevel", "error"}, packages...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "npm", args...).CombinedOutput(); err != nil {
			t.Fatalf("npm install %v: %v: %s", packages, err, out)
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nm := filepath.Join(d, "node_modules")
	installed[key] = nm
	return nm
}
