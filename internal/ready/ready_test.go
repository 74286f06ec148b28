package ready

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	r := Run(
		Check{"a", func() error { return nil }},
		Check{"b", func() error { return ErrUnsupported }},
	)
	if !r.Ready || r.Checks["a"] != OK || r.Checks["b"] != "unavailable: "+ErrUnsupported.Error() || len(r.Failed()) != 0 {
		t.Fatalf("an unsupported check must not make the service unready: %+v", r)
	}
	r = Run(
		Check{"a", func() error { return nil }},
		Check{"c", func() error { return errors.New("not writable: read-only file system") }},
		Check{"b", func() error { return errors.New("missing") }},
	)
	if r.Ready || r.Checks["c"] != "not writable: read-only file system" || !slices.Equal(r.Failed(), []string{"b", "c"}) {
		t.Fatalf("failed checks: %+v %v", r, r.Failed())
	}
}

func TestWritable(t *testing.T) {
	dir := t.TempDir()
	if err := Writable(dir); err != nil {
		t.Fatalf("a temporary folder: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the probe left %v", left)
	}
	if err := Writable(filepath.Join(dir, "nope")); err == nil || !strings.HasPrefix(err.Error(), "missing") || strings.Contains(err.Error(), dir) {
		t.Fatalf("a missing folder: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if err := Writable(file); err == nil || err.Error() != "not a folder" {
		t.Fatalf("a file: %v", err)
	}

	// A folder nobody may write in: read-only by its mode for a normal
	// user, immutable (chattr +i, which binds root too) when root.
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o500)
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", ro).CombinedOutput(); err != nil {
			t.Skipf("root, and chattr +i is not possible here (%v %s): nothing stops root from writing", err, out)
		}
		defer exec.Command("chattr", "-i", ro).Run()
	}
	if err := Writable(ro); err == nil || !strings.HasPrefix(err.Error(), "not writable: ") || strings.Contains(err.Error(), dir) {
		t.Fatalf("a read-only folder: %v", err)
	}
}

func TestFreeSpace(t *testing.T) {
	dir := t.TempDir()
	err := FreeSpace(1, map[string]string{"workspace": dir})
	if errors.Is(err, ErrUnsupported) {
		t.Skip("no statfs on this platform")
	}
	if err != nil {
		t.Fatalf("1 byte free: %v", err)
	}
	err = FreeSpace(1<<62, map[string]string{"workspace": dir, "data_dir": dir})
	if err == nil || !strings.Contains(err.Error(), "below the minimum of 4294967296.0 GiB (TOOLSVC_MIN_FREE_BYTES): data_dir has ") ||
		!strings.Contains(err.Error(), "; workspace has ") {
		t.Fatalf("4 EiB free: %v", err)
	}
	if err := FreeSpace(1, map[string]string{"workspace": filepath.Join(dir, "nope")}); err == nil {
		t.Fatal("statfs of a missing folder succeeded")
	}
}

// TestBare: every value but "ok", "starting ..." and "off: ..." becomes
// "down"; those two lose their reasons; names are kept, and the checks
// given are not changed.
func TestBare(t *testing.T) {
	checks := map[string]string{
		"workspace":  OK,
		"data_dir":   "not writable: read-only file system",
		"free_space": "unavailable: " + ErrUnsupported.Error(),
		"mcp:memory": "down, restarting in the background: its stderr ended with: secret",
		"tool:exec":  "off: no sandbox",
		"mcp:fetch":  "starting (since 3 s)",
		"mcp:start":  "down, restarting in the background: starting the program failed",
	}
	got := Bare(checks)
	want := map[string]string{"workspace": OK, "data_dir": Down, "free_space": Down, "mcp:memory": Down, "tool:exec": Off,
		"mcp:fetch": Starting, "mcp:start": Down}
	if !maps.Equal(got, want) {
		t.Errorf("Bare = %q, want %q", got, want)
	}
	if checks["data_dir"] != "not writable: read-only file system" {
		t.Errorf("Bare changed its argument: %q", checks)
	}
	if b := Bare(nil); b == nil || len(b) != 0 {
		t.Errorf("Bare(nil) = %#v", b)
	}
}
