package pathx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRel(t *testing.T) {
	sep := string(filepath.Separator)
	root := filepath.VolumeName(filepath.Join(sep, "x")) + sep // "/" or `C:\`
	ws := filepath.Join(root, "srv", "ws")
	tests := []struct {
		name, dir, p, rel string
		ok                bool
	}{
		{"itself", ws, ws, ".", true},
		{"child", ws, filepath.Join(ws, "a"), "a", true},
		{"grandchild, forward slashes", ws, filepath.Join(ws, "a", "b.txt"), "a/b.txt", true},
		{"parent", ws, filepath.Join(root, "srv"), "", false},
		{"sibling sharing a prefix", ws, ws + "2", "", false},
		{"sibling file sharing a prefix", ws, ws + ".txt", "", false},
		{"root holds everything", root, filepath.Join(root, "etc"), "etc", true},
		{"root itself", root, root, ".", true},
		{"elsewhere", ws, filepath.Join(root, "etc", "passwd"), "", false},
		{"dir with a trailing separator", ws + sep, filepath.Join(ws, "a"), "a", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rel, ok := Rel(tc.dir, tc.p)
			if rel != tc.rel || ok != tc.ok {
				t.Errorf("Rel(%q, %q) = %q, %v; want %q, %v", tc.dir, tc.p, rel, ok, tc.rel, tc.ok)
			}
			if got := Contains(tc.dir, tc.p); got != tc.ok {
				t.Errorf("Contains(%q, %q) = %v", tc.dir, tc.p, got)
			}
		})
	}
}

func TestStripPath(t *testing.T) {
	_, err := os.Open(filepath.Join(t.TempDir(), "secret-host-dir", "x"))
	got := StripPath(fmt.Errorf("reading: %w", err))
	if got == nil || strings.Contains(got.Error(), "secret-host-dir") || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("StripPath = %v; want the error without its path", got)
	}
	plain := errors.New("plain")
	if StripPath(plain) != plain || StripPath(nil) != nil {
		t.Error("StripPath changed an error without a path")
	}
}
