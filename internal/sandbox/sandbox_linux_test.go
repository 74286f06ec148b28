package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// newForTest builds a sandbox of mode, skipping or failing when the machine
// lacks it: a kernel without Landlock cannot be fixed by installing a
// package, so that skips; a missing bubblewrap can, so under CI it fails.
func newForTest(t *testing.T, mode Mode, opts Options) *Sandbox {
	t.Helper()
	opts.Mode = mode
	s, err := New(opts)
	if err != nil {
		switch {
		case mode == Landlock:
			t.Skipf("SANDBOX MODE NOT TESTED: %v", err)
		case os.Getenv("CI") == "true":
			t.Fatalf("sandbox mode %s unavailable under CI (install the bubblewrap package): %v", mode, err)
		default:
			t.Skipf("SANDBOX MODE NOT TESTED: %v", err)
		}
	}
	return s
}

type fixture struct {
	ws, data, private, outside string
}

func newFixture(t *testing.T) fixture {
	base := t.TempDir()
	f := fixture{
		ws:      filepath.Join(base, "ws"),
		data:    filepath.Join(base, "data"),
		private: filepath.Join(base, "secret"),
		outside: filepath.Join(base, "outside"),
	}
	for _, d := range []string{f.ws, filepath.Join(f.data, "audit_logs"), f.private, f.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range map[string]string{
		filepath.Join(f.data, "audit_logs", "call.json"): "AUDIT-RECORD",
		filepath.Join(f.private, "key.txt"):              "PRIVATE-KEY",
		filepath.Join(f.ws, "hello.txt"):                 "hello world\n",
	} {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// tempFor returns the temporary folder a command in s gets, as exec makes
// it: the sandbox's fresh one where it has that, else a new folder.
func tempFor(t *testing.T, s *Sandbox) string {
	if dir, ok := s.FreshTemp(); ok {
		return dir
	}
	return t.TempDir()
}

// run runs script with sh inside s and returns its combined output and
// whether it succeeded.
func run(t *testing.T, s *Sandbox, f fixture, script string) (string, bool) {
	t.Helper()
	tmp := tempFor(t, s)
	path, args, childTmp := s.Command(tmp, []string{"/bin/sh", "-c", script})
	cmd := exec.CommandContext(context.Background(), path, args...)
	cmd.Dir = f.ws
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + f.ws, "TMPDIR=" + childTmp}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := s.Start(cmd, tmp)
	if err == nil {
		err, _ = c.Wait()
	}
	return out.String(), err == nil
}

func TestSandboxModes(t *testing.T) {
	for _, mode := range []Mode{Landlock, Bwrap} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t)
			s := newForTest(t, mode, Options{Workspace: f.ws, Private: []string{f.data, f.private}})
			if s.Mode() != mode {
				t.Fatalf("mode = %s, want %s", s.Mode(), mode)
			}
			t.Log(s.Describe())
			allowed := []struct{ name, script string }{
				{"ls", "ls -la"},
				{"cat", "cat hello.txt"},
				{"grep", "grep -c hello hello.txt"},
				{"write workspace", "mkdir -p out && echo built > out/a && cp out/a out/b && mv out/b b && cat b"},
				{"private temp", `echo x > "$TMPDIR/t" && cat "$TMPDIR/t"`},
				{"dev null", "echo gone > /dev/null"},
				{"system read", "cat /etc/passwd >/dev/null && ls /usr/bin >/dev/null"},
			}
			for _, c := range allowed {
				if out, ok := run(t, s, f, c.script); !ok {
					t.Errorf("%s: failed under %s: %s", c.name, mode, out)
				}
			}
			denied := []struct{ name, script, secret string }{
				{"read audit log", "cat " + filepath.Join(f.data, "audit_logs", "call.json"), "AUDIT-RECORD"},
				{"list data dir", "ls " + filepath.Join(f.data, "audit_logs"), "call.json"},
				{"read private path", "cat " + filepath.Join(f.private, "key.txt"), "PRIVATE-KEY"},
				{"write outside", "echo x > " + filepath.Join(f.outside, "pwned"), ""},
				{"write system", "echo x > /etc/pwned", ""},
				{"read shadow", "cat /etc/shadow", "root:"},
			}
			for _, c := range denied {
				out, ok := run(t, s, f, c.script)
				if ok || (c.secret != "" && strings.Contains(out, c.secret)) {
					t.Errorf("%s: allowed under %s: %s", c.name, mode, out)
				}
			}
			if _, err := os.Stat(filepath.Join(f.outside, "pwned")); err == nil {
				t.Errorf("a file was written outside the workspace")
			}
		})
	}
}

func TestSandboxNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HELLO-FROM-HOST\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	probe := fmt.Sprintf("exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3'", port)
	for _, mode := range []Mode{Landlock, Bwrap} {
		for _, network := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/network=%v", mode, network), func(t *testing.T) {
				f := newFixture(t)
				s := newForTest(t, mode, Options{Workspace: f.ws, Private: []string{f.data}, Network: network})
				if !s.NetworkEnforced() {
					t.Fatalf("network setting is not enforced by %s", mode)
				}
				out, _ := run(t, s, f, probe)
				if reached := strings.Contains(out, "HELLO-FROM-HOST"); reached != network {
					t.Errorf("network=%v but reached=%v under %s: %s", network, reached, mode, out)
				}
			})
		}
	}
}

func TestGrantExcept(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"a/b/private", "a/b/open", "a/c"} {
		os.MkdirAll(filepath.Join(base, d), 0o755)
	}
	os.WriteFile(filepath.Join(base, "a/b/file"), nil, 0o644)
	os.Symlink(filepath.Join(base, "a/b/private"), filepath.Join(base, "a/link"))
	dirs, files := grantExcept(filepath.Join(base, "a"), []string{filepath.Join(base, "a/b/private")})
	got := strings.Join(append(dirs, files...), " ")
	for _, want := range []string{"a/b/open", "a/c", "a/b/file"} {
		if !strings.Contains(got, filepath.Join(base, want)) {
			t.Errorf("grant lacks %s: %s", want, got)
		}
	}
	for _, bad := range []string{"private", "link"} {
		if strings.Contains(got, bad) {
			t.Errorf("grant holds %s: %s", bad, got)
		}
	}
	if d, f := grantExcept(filepath.Join(base, "a/b/private/x"), []string{filepath.Join(base, "a/b/private")}); d != nil || f != nil {
		t.Errorf("a folder inside a private path was granted")
	}
}

func TestExplicitModeUnavailable(t *testing.T) {
	_, err := New(Options{Mode: Bwrap, Workspace: t.TempDir(), Bwrap: "/nonexistent/bwrap"})
	if err == nil || !strings.Contains(err.Error(), "TOOLSVC_EXEC_SANDBOX=bwrap is not available") {
		t.Fatalf("err = %v", err)
	}
	if _, err := New(Options{Mode: "chroot", Workspace: t.TempDir()}); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

func TestAutoPicksStrongestAvailable(t *testing.T) {
	f := newFixture(t)
	s, err := New(Options{Mode: Auto, Workspace: f.ws, Private: []string{f.data}})
	if err != nil {
		t.Fatal(err)
	}
	_, errB := New(Options{Mode: Bwrap, Workspace: f.ws})
	_, errL := New(Options{Mode: Landlock, Workspace: f.ws})
	want := None
	switch {
	case errB == nil:
		want = Bwrap
	case errL == nil:
		want = Landlock
	}
	if s.Mode() != want {
		t.Errorf("auto picked %s, want %s (%s)", s.Mode(), want, s.Describe())
	}
	t.Log(s.Describe())
}

// TestPrivateAncestorOfWorkspace checks that a private folder holding the
// workspace hides everything but the workspace.
func TestPrivateAncestorOfWorkspace(t *testing.T) {
	for _, mode := range []Mode{Landlock, Bwrap} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t)
			parent := filepath.Dir(f.ws)
			s := newForTest(t, mode, Options{Workspace: f.ws, Private: []string{parent}})
			if out, ok := run(t, s, f, "cat hello.txt && echo x > new.txt"); !ok {
				t.Errorf("workspace unusable under a private parent: %s", out)
			}
			if out, ok := run(t, s, f, "cat "+filepath.Join(f.private, "key.txt")); ok || strings.Contains(out, "PRIVATE-KEY") {
				t.Errorf("sibling of the workspace readable: %s", out)
			}
		})
	}
}

// TestAutoNeverDowngradesSilently: when no sandbox works, auto refuses
// rather than running commands unconfined; none must be asked for by name.
func TestAutoNeverDowngradesSilently(t *testing.T) {
	ws := t.TempDir()
	_, err := New(Options{Mode: Auto, Workspace: ws, Bwrap: "/nonexistent/bwrap", noLandlock: true})
	if !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "TOOLSVC_EXEC_SANDBOX=none") {
		t.Fatalf("auto without any sandbox: err = %v", err)
	}
	s, err := New(Options{Mode: None, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Mode() != None || !strings.Contains(s.Describe(), "no sandbox") {
		t.Errorf("explicit none: %s %s", s.Mode(), s.Describe())
	}
}

// BenchmarkLandlockRules builds one command's Landlock rules with the
// private system files carved out of the folders (every entry of /etc
// but the shadow files and /etc/ssh, one rule each) and with them
// covered by mounts instead, as a root service's commands get them.
func BenchmarkLandlockRules(b *testing.B) {
	s, err := New(Options{Mode: Landlock, Workspace: b.TempDir()})
	if err != nil {
		b.Skip(err)
	}
	defer s.Close()
	carved, mounted := buildPolicy(s.policy.ABI, s.ws, s.private, false), s.mounted
	for _, c := range []struct {
		name string
		p    policy
	}{{"carved", carved}, {"mounted", mounted}} {
		b.Run(c.name, func(b *testing.B) {
			s.policy, s.mountns = c.p, false
			b.ReportMetric(float64(len(c.p.RODirs)+len(c.p.ROFiles)+len(c.p.RWDirs)+len(c.p.RWFiles)), "rules")
			for b.Loop() {
				rs, err := s.landlockRuleset(s.ws)
				if err != nil {
					b.Fatal(err)
				}
				rs.close()
			}
		})
	}
}
