//go:build linux

package mcpmount

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/mcpmount/mcptest"
	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// perKeyMount is a Mount over a fresh registry with exec's sandbox of
// mode, so that keys' folders get sandboxes of their own.
func perKeyMount(t *testing.T, mode sandbox.Mode, extra ...string) (*Mount, *env) {
	t.Helper()
	e := newEnv(t, mode, extra...)
	reg := registry.New(registry.Options{DefaultTimeout: 30 * time.Second, Log: zerolog.Nop()})
	m := NewMount(MountOptions{Registry: reg, Deps: e.deps, Log: zerolog.New(e.logs), CallTimeout: time.Second,
		Sandbox: &sandbox.Options{Mode: mode, Workspace: e.ws.Dir(), Writable: append([]string{e.deps.Home}, extra...), MaxProcs: 256, MaxMemory: 2 << 30}})
	t.Cleanup(m.Close)
	return m, e
}

// fakeEntry is an mcpServers entry running the fake server exe (the test
// binary), per key with the keys given; its processes carry marker in
// their environment, and FAKE_WS is their ${WORKSPACE}.
func fakeEntry(exe, marker, keys string) string {
	return `{"command":` + strconv.Quote(exe) + `,"env":{"` + fakeVar + `":"raw","FAKE_WS":"${WORKSPACE}","FAKE_MARK":` + strconv.Quote(marker) + `}` + keys + `}`
}

// mountEntries puts entries in use.
func mountEntries(t *testing.T, m *Mount, kv ...string) {
	t.Helper()
	commit, _, err := m.Prepare(entries(kv...), allOn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	settled(t, m)
}

// marked returns the processes whose environment holds FAKE_MARK=marker:
// the instances of a test's server, and the sandbox's own processes
// around each (a shell first in its PID namespace, bubblewrap).
func marked(marker string) []int { return markedRunning(marker, "") }

// instancesOf counts the processes of program prog among marked(marker):
// one per instance.
func instancesOf(marker, prog string) int { return len(markedRunning(marker, prog)) }

func markedRunning(marker, prog string) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("FAKE_MARK="+marker+"\x00")) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue // ended, not yet reaped
			}
		}
		if prog != "" {
			cmd, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
			if argv0, _, _ := bytes.Cut(cmd, []byte{0}); string(argv0) != prog {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// waitUntil polls cond for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// as returns a context of a call by key, working in folder.
func as(key, folder string) context.Context {
	return registry.WithCall(context.Background(), registry.Call{Facts: registry.Meta{Key: key, Workspace: folder}})
}

// mountedTool returns the tool name of the Mount's server.
func mountedTool(t *testing.T, m *Mount, server, name string) registry.Tool {
	t.Helper()
	m.mu.Lock()
	s := m.servers[server]
	m.mu.Unlock()
	return toolByName(t, s.srv, name)
}

// run calls the tool as key in folder and fails the test on an error.
func run(t *testing.T, tool registry.Tool, key, folder, args string) string {
	t.Helper()
	out, err := tool.Execute(as(key, folder), json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s as %q: %v", tool.Name(), key, err)
	}
	return out
}

func listingOf(t *testing.T, m *Mount, server string) *Server {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servers[server].srv
}

// TestPerKeyRouting: the tools of a per_key server are listed by its
// listing instance, which runs outside the workspace; each key's calls go
// to an instance of its own, the calls without a key to one they share;
// Close stops every instance and removes the listing instance's folder.
func TestPerKeyRouting(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	m, e := perKeyMount(t, sandbox.None)
	exe, _ := os.Executable()
	marker := t.Name() + strconv.Itoa(os.Getpid())
	mountEntries(t, m, "fake", fakeEntry(exe, marker, `,"per_key":true`))

	checks := map[string]string{}
	m.Ready(checks)
	if checks["mcp:fake"] != "ok" {
		t.Fatalf("ready: %v", checks)
	}
	listing := listingOf(t, m, "fake")
	scratch := listing.d.Workspace.Dir()
	if pathx.Contains(e.ws.Dir(), scratch) || pathx.Contains(scratch, e.ws.Dir()) {
		t.Errorf("the listing instance runs in %s, which overlaps the workspace %s", scratch, e.ws.Dir())
	}
	if n := instancesOf(marker, exe); n != 1 {
		t.Errorf("%d processes before any call, want the listing instance alone", n)
	}

	count := mountedTool(t, m, "fake", "fake__count")
	for _, c := range []struct{ key, want string }{{"", "1"}, {"", "2"}, {"alice", "1"}, {"bob", "1"}, {"alice", "2"}, {"", "3"}} {
		if got := run(t, count, c.key, "", `{}`); got != c.want {
			t.Errorf("count as %q = %s, want %s", c.key, got, c.want)
		}
	}
	if got := listing.keyed.running(); !slices.Equal(got, []string{"/", "alice/", "bob/"}) {
		t.Errorf("running: %v", got)
	}
	// A key without a folder of its own works in the whole workspace.
	if out := run(t, mountedTool(t, m, "fake", "fake__probe"), "alice", "", `{}`); !strings.Contains(out, "ws: "+e.ws.Dir()+"\n") || !strings.Contains(out, "cwd: "+e.ws.Dir()+"\n") {
		t.Errorf("alice's instance: %s", out)
	}
	if n := instancesOf(marker, exe); n != 4 {
		t.Errorf("%d processes, want the listing instance and three keys'", n)
	}
	m.Close()
	if live := marked(marker); len(live) != 0 {
		t.Errorf("processes left after Close: %v", live)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("the listing instance's folder is left: %v", err)
	}
	waitUntil(t, "the instances' goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines })
	if _, err := count.Execute(as("alice", ""), []byte(`{}`)); toolerr.ErrorCode(err) != toolerr.Unavailable {
		t.Errorf("a call after Close: %v", err)
	}
}

// TestPerKeyIdle: a key's instance stops after idle_timeout without a
// call, not while a call runs on it; its next call starts a fresh one.
func TestPerKeyIdle(t *testing.T) {
	m, e := perKeyMount(t, sandbox.None)
	exe, _ := os.Executable()
	marker := t.Name() + strconv.Itoa(os.Getpid())
	mountEntries(t, m, "fake", fakeEntry(exe, marker, `,"per_key":true,"idle_timeout":"300ms"`))
	listing := listingOf(t, m, "fake")
	count := mountedTool(t, m, "fake", "fake__count")

	// A call running longer than the idle time keeps its instance.
	ctx, cancel := context.WithCancel(as("alice", ""))
	done := make(chan error, 1)
	go func() {
		_, err := mountedTool(t, m, "fake", "fake__slow").Execute(ctx, []byte(`{}`))
		done <- err
	}()
	waitUntil(t, "alice's instance", func() bool { return len(listing.keyed.running()) == 1 })
	time.Sleep(time.Second)
	if got := listing.keyed.running(); !slices.Equal(got, []string{"alice/"}) {
		t.Errorf("alice's instance stopped during her call: %v", got)
	}
	cancel()
	if err := <-done; toolerr.ErrorCode(err) != toolerr.Canceled {
		t.Errorf("the canceled call: %v", err)
	}
	if got := run(t, count, "alice", "", `{}`); got != "1" {
		t.Errorf("count = %s", got)
	}
	waitUntil(t, "alice's instance to stop", func() bool { return len(listing.keyed.running()) == 0 })
	waitUntil(t, "alice's process to end", func() bool { return instancesOf(marker, exe) == 1 })
	if !strings.Contains(e.logs.String(), "stopped after idle_timeout") {
		t.Errorf("no log line says why the instance stopped:\n%s", e.logs.String())
	}
	if got := run(t, count, "alice", "", `{}`); got != "1" {
		t.Errorf("count in a fresh instance = %s, want 1", got)
	}
}

// TestPerKeyMaxInstances: with max_instances running, a new key's call
// stops the instance idle longest to make room; while every instance
// runs a call, it gets a busy error telling the model to retry.
func TestPerKeyMaxInstances(t *testing.T) {
	m, e := perKeyMount(t, sandbox.None)
	exe, _ := os.Executable()
	marker := t.Name() + strconv.Itoa(os.Getpid())
	mountEntries(t, m, "fake", fakeEntry(exe, marker, `,"per_key":true,"max_instances":2`))
	listing := listingOf(t, m, "fake")
	count := mountedTool(t, m, "fake", "fake__count")
	slow := mountedTool(t, m, "fake", "fake__slow")

	run(t, count, "alice", "", `{}`)
	run(t, count, "bob", "", `{}`)
	run(t, count, "alice", "", `{}`) // bob is now the one idle longest
	if got := run(t, count, "carol", "", `{}`); got != "1" {
		t.Errorf("carol's count = %s", got)
	}
	if got := listing.keyed.running(); !slices.Equal(got, []string{"alice/", "carol/"}) {
		t.Errorf("running after carol's call: %v, want bob's stopped", got)
	}
	if n := instancesOf(marker, exe); n != 3 {
		t.Errorf("%d processes, want the listing instance and two keys'", n)
	}
	if !strings.Contains(e.logs.String(), `"key":"bob"`) || !strings.Contains(e.logs.String(), "to make room") {
		t.Errorf("no log line says bob's instance was stopped for room:\n%s", e.logs.String())
	}

	// Both busy: dave must wait.
	ctx, cancel := context.WithCancel(context.Background())
	var calls []chan error
	for _, k := range []string{"alice", "carol"} {
		done := make(chan error, 1)
		calls = append(calls, done)
		c := registry.WithCall(ctx, registry.Call{Facts: registry.Meta{Key: k}})
		go func() { _, err := slow.Execute(c, []byte(`{}`)); done <- err }()
	}
	waitUntil(t, "both calls to run", func() bool {
		listing.keyed.mu.Lock()
		defer listing.keyed.mu.Unlock()
		n := 0
		for _, in := range listing.keyed.m {
			n += in.busy
		}
		return n == 2
	})
	_, err := count.Execute(as("dave", ""), []byte(`{}`))
	if toolerr.ErrorCode(err) != toolerr.Busy || !strings.Contains(err.Error(), "retry in a moment") {
		t.Errorf("dave's call while every instance is busy: %v", err)
	}
	cancel()
	for _, done := range calls {
		<-done
	}
	if got := run(t, count, "dave", "", `{}`); got != "1" {
		t.Errorf("dave's count = %s", got)
	}
	if n := instancesOf(marker, exe); n != 3 {
		t.Errorf("%d processes, want at most max_instances keys' and the listing instance", n)
	}
}

// TestPerKeyReload: a reload that changes a per_key entry stops its
// listing instance and every key's instance; an unchanged one keeps
// them.
func TestPerKeyReload(t *testing.T) {
	m, _ := perKeyMount(t, sandbox.None)
	exe, _ := os.Executable()
	marker := t.Name() + strconv.Itoa(os.Getpid())
	entry := fakeEntry(exe, marker, `,"per_key":true`)
	mountEntries(t, m, "fake", entry)
	count := mountedTool(t, m, "fake", "fake__count")
	run(t, count, "alice", "", `{}`)
	run(t, count, "bob", "", `{}`)

	mountEntries(t, m, "fake", entry)
	if got := run(t, count, "alice", "", `{}`); got != "2" {
		t.Errorf("alice's count after a reload that kept the entry = %s, want 2", got)
	}
	old := listingOf(t, m, "fake")
	mountEntries(t, m, "fake", fakeEntry(exe, marker, `,"per_key":true,"idle_timeout":120`))
	waitUntil(t, "the old instances to stop", func() bool { return instancesOf(marker, exe) == 1 })
	if got := old.keyed.running(); len(got) != 0 {
		t.Errorf("the old listing instance still runs instances: %v", got)
	}
	if got := run(t, mountedTool(t, m, "fake", "fake__count"), "alice", "", `{}`); got != "1" {
		t.Errorf("alice's count after the change = %s, want 1 (a new instance)", got)
	}
	// Removed: everything stops.
	mountEntries(t, m)
	waitUntil(t, "every process to end", func() bool { return len(marked(marker)) == 0 })
}

// TestResultsInKeysFolder: images and resources from a shared server's
// results are saved into the calling key's own folder, named relative to
// it; a call without a folder saves into the workspace.
func TestResultsInKeysFolder(t *testing.T) {
	e := newEnv(t, sandbox.None)
	s := e.start(t, "fake", fakeConfig(t, "raw", nil))
	picture := toolByName(t, s, "fake__picture")
	for _, folder := range []string{"tenants/alice", ""} {
		out, err := picture.Execute(as("alice", folder), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		files := regexp.MustCompile(`saved to (\S+)`).FindAllStringSubmatch(out, -1)
		if len(files) != 2 {
			t.Fatalf("result: %s", out)
		}
		for _, f := range files {
			if !strings.HasPrefix(f[1], "mcp/fake/") {
				t.Errorf("file named %s, want it relative to the key's folder", f[1])
			}
			if _, err := os.Stat(filepath.Join(e.ws.Dir(), filepath.FromSlash(folder), f[1])); err != nil {
				t.Errorf("saved file: %v", err)
			}
		}
	}
}

// TestPerKeyFolders: in each sandbox mode that confines files, a key's
// instance runs in the key's own folder (cwd and ${WORKSPACE}), with a
// HOME of the folder's own below the shared one, cannot read another
// key's folder, and saves the images of its results there.
func TestPerKeyFolders(t *testing.T) {
	modes := sandboxModes(t)[1:]
	if len(modes) == 0 {
		t.Skip("NOT TESTED: no sandbox mode that confines files works here")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The keys' sandboxes show the system, not the test's temporary folders.
	prog := filepath.Join(mcptest.SystemDir(t), "fake-mcp-server")
	if out, err := exec.Command("cp", exe, prog).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			m, e := perKeyMount(t, mode)
			marker := t.Name() + strconv.Itoa(os.Getpid())
			mountEntries(t, m, "fake", fakeEntry(prog, marker, `,"per_key":true`))
			probe := mountedTool(t, m, "fake", "fake__probe")
			ws := e.ws.Dir()
			alice, bob := filepath.Join(ws, "tenants", "alice"), filepath.Join(ws, "tenants", "bob")

			run(t, probe, "bob", "tenants/bob", `{}`)
			secret := filepath.Join(bob, "secret.txt")
			if err := os.WriteFile(secret, []byte("BOB-SECRET"), 0o600); err != nil {
				t.Fatal(err)
			}
			out := run(t, probe, "alice", "tenants/alice", `{"read":`+strconv.Quote(secret)+`}`)
			t.Logf("%s", out)
			for _, want := range []string{"cwd: " + alice + "\n", "ws: " + alice + "\n", "home: " + filepath.Join(e.deps.Home, "tenants%2Falice") + "\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("alice's instance lacks %q", want)
				}
			}
			if strings.Contains(out, "BOB-SECRET") {
				t.Errorf("alice's instance read bob's folder")
			}
			count := mountedTool(t, m, "fake", "fake__count")
			run(t, count, "alice", "tenants/alice", `{}`)
			if got := run(t, count, "bob", "tenants/bob", `{}`); got != "1" {
				t.Errorf("bob's count = %s", got)
			}
			out = run(t, mountedTool(t, m, "fake", "fake__picture"), "alice", "tenants/alice", `{}`)
			f := regexp.MustCompile(`image saved to (\S+)`).FindStringSubmatch(out)
			if f == nil {
				t.Fatalf("picture: %s", out)
			}
			if _, err := os.Stat(filepath.Join(alice, f[1])); err != nil {
				t.Errorf("alice's image is not in her folder: %v", err)
			}
			listing := listingOf(t, m, "fake")
			if dir := listing.d.Workspace.Dir(); pathx.Contains(ws, dir) {
				t.Errorf("the listing instance runs in %s, inside the workspace", dir)
			}
			m.Close()
			if live := marked(marker); len(live) != 0 {
				t.Errorf("processes left after Close: %v", live)
			}
		})
	}
}

// running returns the keys whose instance runs now, each as
// "key/folder".
func (p *instances) running() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k, in := range p.m {
		if in.srv != nil {
			out = append(out, k.key+"/"+k.folder)
		}
	}
	slices.Sort(out)
	return out
}
