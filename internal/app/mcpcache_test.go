//go:build linux

package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/customtools"
	"github.com/countbot/toolsvc/internal/sandbox"
)

// TestMCPCaches: the MCP servers' package caches are kept below the data
// folder, TOOLSVC_EXEC_HOME or not; where the account the servers run as
// (TOOLSVC_EXEC_USER) cannot pass through the data folder, the servers
// get none and the log says how to open the way, rather than every
// server failing to start.
func TestMCPCaches(t *testing.T) {
	cases := []struct {
		name     string
		mode     os.FileMode // of the data folder
		user     *sandbox.User
		execHome bool
		root     bool // needs root
		want     bool // caches
		log      string
	}{
		{name: "the service's account", mode: 0o750, want: true},
		{name: "with TOOLSVC_EXEC_HOME", mode: 0o750, execHome: true, want: true},
		{name: "exec user, data folder passable", mode: 0o751, user: &sandbox.User{Name: "nobody", Uid: 65534, Gid: 65534}, root: true, want: true},
		{name: "exec user, data folder closed", mode: 0o750, user: &sandbox.User{Name: "nobody", Uid: 65534, Gid: 65534}, root: true, log: "chmod o+x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("NOT TESTED: TOOLSVC_EXEC_USER needs root")
			}
			base := t.TempDir()
			data := filepath.Join(base, "data")
			if err := os.Mkdir(data, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(data, tc.mode); err != nil {
				t.Fatal(err)
			}
			// t.TempDir's own folder, mode 0700, opened as an operator's
			// parent folders are.
			if err := os.Chmod(base, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			d := Deps{DataDir: data, Log: zerolog.New(&logs)}
			if tc.execHome {
				d.Config.Exec.ExecHome = filepath.Join(base, "home")
			}
			caches := mcpCaches(d, tc.user)
			if (caches != nil) != tc.want {
				t.Fatalf("caches: %v, want %v; log: %s", caches, tc.want, logs.String())
			}
			if caches != nil && caches.Root() != filepath.Join(data, "mcp-cache") {
				t.Errorf("root %s, want below the data folder", caches.Root())
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q lacks %q", logs.String(), tc.log)
			}
		})
	}
	if mcpCaches(Deps{Log: zerolog.Nop()}, nil) != nil {
		t.Error("caches without a data folder")
	}
}

// TestToolsFileNotInMCPCaches: a stdio server can write its cache, so a
// tools file there is refused as one in the workspace is.
func TestToolsFileNotInMCPCaches(t *testing.T) {
	base := t.TempDir()
	ws, data := filepath.Join(base, "ws"), filepath.Join(base, "data")
	file := filepath.Join(data, "mcp-cache", "memory", "server", "tools.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("tools: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := customtools.CheckPlace(file, modelWritable(ws, data, config.Exec{}))
	if err == nil || !strings.Contains(err.Error(), "the MCP servers' package caches") {
		t.Errorf("a tools file in a server's cache: %v", err)
	}
	beside := filepath.Join(data, "tools.yaml")
	if err := os.WriteFile(beside, []byte("tools: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := customtools.CheckPlace(beside, modelWritable(ws, data, config.Exec{})); err != nil {
		t.Errorf("a tools file in the data folder beside the caches: %v", err)
	}
}
