package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataDirInsideWorkspaceRefused starts the service with a data folder
// the tools could reach, directly or through a symbolic link, and expects
// start-up to stop with a message naming the variable.
func TestDataDirInsideWorkspaceRefused(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "elsewhere")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct{ ws, data, want string }{
		"inside":         {ws, filepath.Join(ws, "data"), "is inside the workspace"},
		"through a link": {ws, filepath.Join(link, ".toolsvc"), "is inside the workspace"},
		"same":           {link, ws, "is the workspace"},
		"around":         {ws, base, "contains the workspace"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := startError(t, map[string]string{"WORKSPACE": tt.ws, "DATA_DIR": tt.data})
			if err == nil || !strings.Contains(err.Error(), "TOOLSVC_DATA_DIR") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v; want a TOOLSVC_DATA_DIR error saying %q", err, tt.want)
			}
			if name == "inside" {
				if _, err := os.Stat(tt.data); !os.IsNotExist(err) {
					t.Errorf("the refused data folder was created: %v", err)
				}
			}
		})
	}
}
