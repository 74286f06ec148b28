package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/workspace"
)

// allSandboxModes is none plus every sandbox mode the machine offers.
func allSandboxModes(t *testing.T) []string {
	return append([]string{"none"}, sandboxModes(t)...)
}

// TestExecHomeIsPerCall plants files in HOME that programs run on their
// own (git's .gitconfig, Python's usercustomize.py) and checks that the
// next call does not see them, in every sandbox mode: each call has its
// own HOME inside its private temporary folder.
func TestExecHomeIsPerCall(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python = ""
		t.Logf("the usercustomize.py plant is not tried: %s is missing", "/usr/bin/python3")
	}
	for _, mode := range allSandboxModes(t) {
		t.Run(mode, func(t *testing.T) {
			s := startServer(t, map[string]string{"EXEC_SANDBOX": mode})
			home := mustSucceed(t, s.invoke(t, "exec", execArgs(`echo "$HOME"; echo "$TMPDIR"; echo dotfile > ~/.planted; test -w ~ && echo writable`)))
			lines := strings.Split(home, "\n")
			if len(lines) < 3 || lines[0] != lines[1]+"/home" || lines[2] != "writable" {
				t.Fatalf("HOME is not a writable folder in the call's TMPDIR:\n%s", home)
			}
			if lines[0] == s.Workspace || strings.HasPrefix(lines[0], s.Workspace+"/") {
				t.Errorf("HOME is in the workspace: %s", lines[0])
			}
			got := mustSucceed(t, s.invoke(t, "exec", execArgs(`if test -e ~/.planted; then echo present; else echo absent; fi; echo "$HOME"`)))
			if !strings.HasPrefix(got, "absent\n") {
				t.Errorf("a file written to ~ in one call is in the next:\n%s", got)
			}

			// git: an alias planted in ~/.gitconfig.
			if _, err := exec.LookPath("git"); err == nil {
				mustSucceed(t, s.invoke(t, "exec", execArgs(`git config --global alias.st '!echo planted-alias-ran' && git st`)))
				out := s.invoke(t, "exec", execArgs(`git config --global --get alias.st; echo "exit $?"`))
				if r := mustSucceed(t, out); strings.Contains(r, "planted-alias-ran") || !strings.Contains(r, "exit 1") {
					t.Errorf("a .gitconfig alias planted in one call is in the next:\n%s", r)
				}
			}

			// Python: a usercustomize.py that every python3 would run. The
			// first call proves the plant works within the call.
			if python != "" {
				marker := filepath.Join(s.Workspace, "usercustomize-ran")
				plant := fmt.Sprintf(`set -e; d=$(%[1]s -c 'import site; print(site.getusersitepackages())'); mkdir -p "$d"
echo 'open("%[2]s", "a").write("ran\\n")' > "$d/usercustomize.py"; %[1]s -c pass`, python, marker)
				out := mustSucceed(t, s.invoke(t, "exec", execArgs(plant)))
				if b, err := os.ReadFile(marker); err != nil || string(b) != "ran\n" {
					t.Fatalf("the plant did not run within its own call (%q, %v; output %q): the test proves nothing", b, err, out)
				}
				mustSucceed(t, s.invoke(t, "exec", execArgs(python+" -c pass")))
				if b, _ := os.ReadFile(marker); string(b) != "ran\n" {
					t.Errorf("usercustomize.py planted in one call ran in the next: %q", b)
				}
			}
			if strings.Contains(s.Logs(), "toolsvc-home-") {
				t.Errorf("a shared HOME is still made:\n%s", s.Logs())
			}
		})
	}
}

// TestExecHomeConfigured: with TOOLSVC_EXEC_HOME the service creates the
// folder itself, private, and what commands keep there lasts between
// calls, in every sandbox mode.
func TestExecHomeConfigured(t *testing.T) {
	for _, mode := range allSandboxModes(t) {
		t.Run(mode, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "parent", "home")
			s := startServer(t, map[string]string{"EXEC_SANDBOX": mode, "EXEC_HOME": home})
			fi, err := os.Lstat(home)
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Fatalf("TOOLSVC_EXEC_HOME was not created as a private folder: %v, %v", fi, err)
			}
			if got := mustSucceed(t, s.invoke(t, "exec", execArgs(`echo "$HOME"; echo kept > ~/.dotfile`))); got != home+"\n" {
				t.Errorf("HOME = %q, want %s", got, home)
			}
			if got := mustSucceed(t, s.invoke(t, "exec", execArgs(`cat ~/.dotfile`))); got != "kept\n" {
				t.Errorf("a dotfile in TOOLSVC_EXEC_HOME did not last between calls: %q", got)
			}
			if b, err := os.ReadFile(filepath.Join(home, ".dotfile")); err != nil || string(b) != "kept\n" {
				t.Errorf("the dotfile is not in TOOLSVC_EXEC_HOME on the host: %q, %v", b, err)
			}
			s.Stop(t)
			// The folder it made is accepted at the next start.
			s = startServer(t, map[string]string{"EXEC_SANDBOX": mode, "EXEC_HOME": home})
			if got := mustSucceed(t, s.invoke(t, "exec", execArgs(`cat ~/.dotfile`))); got != "kept\n" {
				t.Errorf("after a restart: %q", got)
			}
		})
	}
}

// TestExecHomeRefused: a TOOLSVC_EXEC_HOME someone else could have planted
// files in stops start-up with a message naming the variable and the
// problem, and is left as it was.
func TestExecHomeRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, home string)
		want  string
	}{
		{"world-writable", func(t *testing.T, home string) {
			if err := os.Mkdir(home, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(home, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("echo planted\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "writable by group or others (mode 0777)"},
		{"symbolic link", func(t *testing.T, home string) {
			if err := os.Symlink(t.TempDir(), home); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"another owner", func(t *testing.T, home string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to make a folder of another user")
			}
			if err := os.Mkdir(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(home, 4321, 4321); err != nil {
				t.Fatal(err)
			}
		}, "belongs to uid 4321"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			tc.setup(t, home)
			before, _ := os.Lstat(home)
			// startError returns nil when the service started after all.
			err := startError(t, map[string]string{"EXEC_SANDBOX": "none", "EXEC_HOME": home})
			if err == nil || !strings.Contains(err.Error(), "TOOLSVC_EXEC_HOME") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run() = %v, want a start-up error naming TOOLSVC_EXEC_HOME and %q", err, tc.want)
			}
			after, _ := os.Lstat(home)
			if before.Mode() != after.Mode() {
				t.Errorf("the refused folder was changed: %v -> %v", before.Mode(), after.Mode())
			}
		})
	}
}

// TestWorkspaceTempFolderHeals replaces the workspace's temporary folder
// with a file and with symbolic links, from a command as an attacker would
// and directly on the host, in every sandbox mode: /readyz is ready again
// without a restart, the link is removed as a link, and nothing outside
// the workspace is touched.
func TestWorkspaceTempFolderHeals(t *testing.T) {
	for _, mode := range allSandboxModes(t) {
		t.Run(mode, func(t *testing.T) {
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "keep.txt"), []byte("outside"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := treeOf(t, outside)
			s := startServer(t, map[string]string{"EXEC_SANDBOX": mode})
			tmp := filepath.Join(s.Workspace, workspace.TempDir)
			plants := []struct {
				name, cmd string
				host      func() error
			}{
				{name: "file by exec", cmd: `mv .toolsvc-tmp moved-1 && printf planted > .toolsvc-tmp`},
				{name: "link outside by exec", cmd: fmt.Sprintf(`mv .toolsvc-tmp moved-2 && ln -s %q .toolsvc-tmp`, outside)},
				{name: "link to / by exec", cmd: `mv .toolsvc-tmp moved-3 && ln -s / .toolsvc-tmp`},
				{name: "file on the host", host: func() error { return replaceWith(tmp, func() error { return os.WriteFile(tmp, []byte("x"), 0o644) }) }},
				{name: "link outside on the host", host: func() error { return replaceWith(tmp, func() error { return os.Symlink(outside, tmp) }) }},
				{name: "link to / on the host", host: func() error { return replaceWith(tmp, func() error { return os.Symlink("/", tmp) }) }},
			}
			for _, p := range plants {
				// The folder exists: the probe of /readyz makes it.
				if code, r := s.readyz(t); code != 200 {
					t.Fatalf("%s: not ready before the plant: %d %+v", p.name, code, r)
				}
				if p.host != nil {
					if err := p.host(); err != nil {
						t.Fatal(err)
					}
				} else {
					mustSucceed(t, s.invoke(t, "exec", execArgs(p.cmd)))
				}
				if fi, err := os.Lstat(tmp); err != nil || fi.IsDir() {
					t.Fatalf("%s: the plant did not take: %v, %v", p.name, fi, err)
				}
				waitFor(t, p.name+": /readyz ready again", func() bool { code, _ := s.readyz(t); return code == 200 })
				if fi, err := os.Lstat(tmp); err != nil || !fi.IsDir() {
					t.Errorf("%s: %s is not a real folder again: %v, %v", p.name, workspace.TempDir, fi, err)
				}
				// A write, which makes its temporary file there, works.
				mustSucceed(t, s.invoke(t, "write_file", map[string]any{"path": "after.txt", "content": p.name}))
				if after := treeOf(t, outside); after != before {
					t.Fatalf("%s: the folder outside the workspace changed:\nbefore %s\nafter  %s", p.name, before, after)
				}
				for _, sys := range []string{"/etc/passwd", "/bin/sh"} {
					if _, err := os.Stat(sys); err != nil {
						t.Fatalf("%s: %s is gone: %v", p.name, sys, err)
					}
				}
			}
			if n := strings.Count(s.Logs(), "had been replaced by"); n < len(plants) {
				t.Errorf("%d repair warnings for %d plants:\n%s", n, len(plants), s.Logs())
			}
			assertContains(t, "log", s.Logs(), "had been replaced by a file of 7 bytes", "had been replaced by a symbolic link")
		})
	}
}

// TestWorkspaceTempFolderHealsAtStart: a temporary folder replaced while
// the service was down (or by a command just before a crash) is repaired
// at start-up, so the service starts ready instead of staying unready
// across restarts.
func TestWorkspaceTempFolderHealsAtStart(t *testing.T) {
	outside := t.TempDir()
	before := treeOf(t, outside)
	for _, target := range []string{outside, "/"} {
		ws := filepath.Join(t.TempDir(), "ws")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(ws, workspace.TempDir)); err != nil {
			t.Fatal(err)
		}
		s := startServer(t, map[string]string{"WORKSPACE": ws, "EXEC_SANDBOX": "none"})
		if code, r := s.readyz(t); code != 200 {
			t.Errorf("link to %s: not ready after the start: %d %+v", target, code, r)
		}
		assertContains(t, "log", s.Logs(), "had been replaced by a symbolic link")
		s.Stop(t)
	}
	if after := treeOf(t, outside); after != before {
		t.Errorf("the folder outside the workspace changed:\nbefore %s\nafter  %s", before, after)
	}
}

// replaceWith moves the folder at p aside (as a command would) and puts
// something else in its place.
func replaceWith(p string, put func() error) error {
	if err := os.Rename(p, p+fmt.Sprintf(".aside-%d", os.Getpid())); err != nil {
		return err
	}
	if err := os.RemoveAll(p + fmt.Sprintf(".aside-%d", os.Getpid())); err != nil {
		return err
	}
	return put()
}

// treeOf describes every entry under dir: path, mode, size and content.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s %d", p, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("; ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
