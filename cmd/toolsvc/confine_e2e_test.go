package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// snapshot records every file and folder outside the workspace that the
// attacks aim at, with content hashes, so a test can prove nothing there was
// read into a result, changed or created.
func snapshot(t *testing.T, root, skip string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, _ := os.Lstat(p)
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			v += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		m[p] = v
		return nil
	})
	return m
}

// TestConfinement tries every way out of the workspace against every
// filesystem tool: each attempt must be refused, and nothing outside may be
// read, changed or created.
func TestConfinement(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	ws := s.Workspace
	base := filepath.Dir(ws)
	const secret = "TOP-SECRET-OUTSIDE"
	os.WriteFile(filepath.Join(base, "outside.txt"), []byte(secret+"\n"), 0o644)
	os.MkdirAll(filepath.Join(base, "outdir"), 0o755)
	os.WriteFile(filepath.Join(base, "outdir", "inner.txt"), []byte(secret+"\n"), 0o644)
	os.MkdirAll(filepath.Join(base, "ws_evil"), 0o755) // shares the workspace's name as a prefix
	os.WriteFile(filepath.Join(base, "ws_evil", "secret.txt"), []byte(secret+"\n"), 0o644)
	os.WriteFile(filepath.Join(base, "ws_evil", "edit.txt"), []byte(secret+"\n"), 0o644)

	// Links planted in the workspace, as a hostile archive or a model's own
	// exec call could leave them.
	links := map[string]string{
		"link-file-abs": filepath.Join(base, "outside.txt"),
		"link-file-rel": "../outside.txt",
		"link-dir-abs":  filepath.Join(base, "outdir"),
		"link-dir-rel":  "../outdir",
		"chain1":        "chain2",
		"chain2":        "sub/chain3",
		"sub/chain3":    "../../outside.txt",
		"link-evil":     "../ws_evil",
		"loop-a":        "loop-b",
		"loop-b":        "loop-a",
	}
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, base, ws)

	paths := []struct{ name, path string }{
		{"dot-dot", "../outside.txt"},
		{"dot-dot deep", "sub/../../outside.txt"},
		{"dot-dot folder", ".."},
		{"absolute outside", filepath.Join(base, "outside.txt")},
		{"absolute system file", "/etc/passwd"},
		{"absolute outside folder", filepath.Join(base, "outdir")},
		{"sibling with shared prefix, absolute", filepath.Join(base, "ws_evil", "secret.txt")},
		{"sibling with shared prefix, relative", "../ws_evil/secret.txt"},
		{"sibling folder", ws + "_evil"},
		{"symlink file, absolute target", "link-file-abs"},
		{"symlink file, relative target", "link-file-rel"},
		{"symlink folder, absolute target", "link-dir-abs/inner.txt"},
		{"symlink folder itself", "link-dir-rel"},
		{"symlink folder, relative target", "link-dir-rel/inner.txt"},
		{"symlink chain", "chain1"},
		{"symlink to sibling", "link-evil/secret.txt"},
		{"symlink loop", "loop-a"},
		{"NUL byte", "inside.txt\x00../../outside.txt"},
		{"tilde", "~/.bashrc"},
	}
	for _, p := range paths {
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": p.path}},
			{"read_file", map[string]any{"paths": []string{p.path}}},
			{"list_dir", map[string]any{"path": p.path}},
			{"write_file", map[string]any{"path": p.path, "content": "pwned"}},
			{"write_file", map[string]any{"path": p.path, "content": "pwned", "mode": "append"}},
			{"edit_file", map[string]any{"path": p.path, "old_str": secret, "new_str": "pwned"}},
		} {
			t.Run(p.name+"/"+call.tool, func(t *testing.T) {
				res := s.invoke(t, call.tool, call.args)
				if _, multi := call.args["paths"]; multi {
					// Several files: failures are reported inline.
					if !strings.Contains(res.Result, "Error:") {
						t.Errorf("not refused: %s", res.Result)
					}
				} else if res.Status != registry.StatusError {
					t.Errorf("not refused: %s", res.Result)
				} else if c := res.Error.Code; c != toolerr.PathDenied && c != toolerr.NotFound {
					t.Errorf("code %s: %s", c, res.Result)
				}
				if strings.Contains(res.Result, secret) || strings.Contains(res.Result, "root:x:") {
					t.Errorf("result shows content from outside: %s", res.Result)
				}
				if strings.Contains(res.Result, base) && !strings.Contains(p.path, base) {
					t.Errorf("result reveals the host path: %s", res.Result)
				}
			})
		}
	}
	after := snapshot(t, base, ws)
	journal := filepath.Join(s.DataDir, "audit_logs", ".journal") // grows by a line per call
	chain := filepath.Join(s.DataDir, "audit_logs", "chain")      // its head moves with every record
	for p, v := range before {
		if after[p] != v && !strings.HasPrefix(p, journal) && !strings.HasPrefix(p, chain) {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && !strings.HasPrefix(p, s.DataDir) {
			t.Errorf("%s was created outside the workspace", p)
		}
	}
	// The planted links are still links: a write never replaced one.
	for name := range links {
		if fi, err := os.Lstat(filepath.Join(ws, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink", name)
		}
	}
}

// TestConfinementMessages checks that a refusal tells the model what to do.
func TestConfinementMessages(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	os.Symlink("/etc", filepath.Join(s.Workspace, "etc"))
	mustFail(t, s.invoke(t, "read_file", `{"path":"../x"}`), toolerr.PathDenied, "outside the workspace", "Next: use a path relative to the workspace")
	mustFail(t, s.invoke(t, "read_file", `{"path":"/etc/passwd"}`), toolerr.PathDenied, "'/etc/passwd' is outside the workspace")
	mustFail(t, s.invoke(t, "read_file", `{"path":"etc/passwd"}`), toolerr.PathDenied, "leads outside the workspace", "symbolic link")
	mustFail(t, s.invoke(t, "write_file", `{"path":"etc","content":"x"}`), toolerr.PathDenied, "symbolic link that leads outside")
}

// TestUnrestrictedWorkspace checks that with the restriction off, absolute
// paths outside work, and relative paths still mean the workspace.
func TestUnrestrictedWorkspace(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"RESTRICT_TO_WORKSPACE": "false"})
	outside := filepath.Join(filepath.Dir(s.Workspace), "free.txt")
	os.WriteFile(outside, []byte("out here\n"), 0o644)
	out := mustSucceed(t, s.invoke(t, "read_file", map[string]any{"path": outside}))
	if !strings.Contains(out, "out here") || !strings.Contains(out, "[File: "+outside) {
		t.Errorf("read outside: %s", out)
	}
	mustSucceed(t, s.invoke(t, "write_file", `{"path":"in.txt","content":"x"}`))
	assertFile(t, filepath.Join(s.Workspace, "in.txt"), "x")
	body, _ := json.Marshal(map[string]string{"path": "x\x00y"})
	mustFail(t, s.invoke(t, "read_file", body), toolerr.PathDenied, "NUL")
}
