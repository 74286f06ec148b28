package homedir

import (
	"path/filepath"
	"testing"
)

// TestForFolder: each key folder gets a HOME of its own below the shared
// one, named after it with its slashes escaped, the same at every call;
// a folder that cannot name one is refused.
func TestForFolder(t *testing.T) {
	home := t.TempDir()
	a, err := ForFolder(home, "tenants/alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ForFolder(home, "tenants/alice", nil)
	b, err := ForFolder(home, "tenants_alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(home)
	if err != nil {
		t.Fatal(err)
	}
	if a != filepath.Join(real, "tenants%2Falice") || a != again || a == b {
		t.Errorf("homes: %s, %s, %s", a, again, b)
	}
	for _, f := range []string{"", ".", ".."} {
		if _, err := ForFolder(home, f, nil); err == nil {
			t.Errorf("folder %q was given a HOME", f)
		}
	}
}
