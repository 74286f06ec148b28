package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestCommandLine runs the built binary: -h, -version and toolsvc help
// answer on stdout and exit 0; a wrong flag or argument prints the usage
// on stderr and exits 1; toolsvc help with a group that does not exist
// names the nearest and exits 2, as a mistake in the command line.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args               []string
		code               int
		stdout, stderr     string // what each must contain; "" means empty
		stdoutIsVersionRow bool
	}{
		{args: []string{"-h"}, stdout: "TOOLSVC_ADDR"},
		{args: []string{"-help"}, stdout: "TOOLSVC_ADDR"},
		{args: []string{"-version"}, stdoutIsVersionRow: true},
		{args: []string{"-nope"}, code: 1, stderr: "TOOLSVC_ADDR"},
		{args: []string{"serve"}, code: 1, stderr: "unexpected argument \"serve\""},
		{args: []string{"help"}, stdout: "toolsvc help all"},
		{args: []string{"help", "exec"}, stdout: "TOOLSVC_EXEC_SANDBOX (default auto)\n"},
		{args: []string{"help", "all"}, stdout: "TOOLSVC_PUBLIC_URL\n"},
		{args: []string{"help", "exce"}, code: 2, stderr: "toolsvc help: no settings group \"exce\"; did you mean exec?"},
		{args: []string{"help", "exec", "all"}, code: 2, stderr: "unexpected argument \"all\""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, tt.args...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("exit code %d; want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout.String(), stderr.String())
			}
			switch {
			case tt.stdoutIsVersionRow:
				f := strings.Fields(stdout.String())
				if len(f) != 2 || f[0] != "toolsvc" || !strings.HasSuffix(stdout.String(), "\n") {
					t.Errorf("stdout %q; want \"toolsvc <version>\\n\"", stdout.String())
				}
			case tt.stdout == "" && stdout.Len() > 0:
				t.Errorf("stdout should be empty: %s", stdout.String())
			case !strings.Contains(stdout.String(), tt.stdout):
				t.Errorf("stdout lacks %q: %s", tt.stdout, stdout.String())
			}
			switch {
			case tt.stderr == "" && stderr.Len() > 0:
				t.Errorf("stderr should be empty: %s", stderr.String())
			case !strings.Contains(stderr.String(), tt.stderr):
				t.Errorf("stderr lacks %q: %s", tt.stderr, stderr.String())
			}
		})
	}
}

// TestHelpIsUsage runs the built binary: toolsvc help prints what -h
// prints, and every line of it, of toolsvc help all and of a group's help
// fits in 80 columns.
func TestHelpIsUsage(t *testing.T) {
	t.Parallel()
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, args := range [][]string{{"-h"}, {"help"}, {"help", "-h"}, {"help", "all"}, {"help", "agents"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("toolsvc %s: %v", strings.Join(args, " "), err)
		}
		key := strings.Join(args, " ")
		out[key] = string(b)
		for i, line := range strings.Split(string(b), "\n") {
			if len(line) > 80 {
				t.Errorf("toolsvc %s: line %d is %d columns: %q", key, i+1, len(line), line)
			}
		}
	}
	if out["help"] != out["-h"] || out["help -h"] != out["-h"] {
		t.Errorf("toolsvc help prints other than -h:\n%s\n----\n%s", out["help"], out["-h"])
	}
	if n := strings.Count(out["-h"], "\n"); n > 60 {
		t.Errorf("-h is %d lines; keep it to 60", n)
	}
	if !strings.Contains(out["help all"], out["help agents"]) {
		t.Error("help all lacks what help agents prints")
	}
}

// TestUsageNamesVersionFlag keeps -h saying what the flags are.
func TestUsageNamesVersionFlag(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, nil, &stdout, &stderr); err == nil {
		t.Fatal("run -h returned nil; want flag.ErrHelp, which main turns into exit 0")
	}
	if !strings.Contains(stdout.String(), "-version") || stderr.Len() != 0 {
		t.Errorf("-h: stdout %q, stderr %q; want the usage, naming -version, on stdout only", stdout.String(), stderr.String())
	}
}

// TestVersionReported: the version -version prints is the one in the
// "listening" log line and in GET /healthz.
func TestVersionReported(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"-version"}, nil, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	want := strings.TrimPrefix(strings.TrimSpace(stdout.String()), "toolsvc ")
	if want == "" || want != version() {
		t.Fatalf("-version printed %q; version() is %q", stdout.String(), version())
	}

	s := startServer(t, nil)
	resp, body := s.do(t, "GET", "/healthz", nil, nil)
	var h struct{ Status, Version string }
	if err := json.Unmarshal(body, &h); err != nil || resp.StatusCode != 200 || h.Status != "ok" || h.Version != want {
		t.Errorf("GET /healthz: %d %s; want status ok and version %q", resp.StatusCode, body, want)
	}
	found := false
	for _, line := range strings.Split(s.Logs(), "\n") {
		var l struct{ Message, Version string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "listening" {
			found = true
			if l.Version != want {
				t.Errorf("listening line has version %q; want %q: %s", l.Version, want, line)
			}
		}
	}
	if !found {
		t.Errorf("no listening line in the logs:\n%s", s.Logs())
	}
}

// TestVersionOf: the version given to the linker wins, then the module
// version the go command stamped (a tag or a pseudo-version), then the
// revision the binary was built from (12 digits), then "devel".
func TestVersionOf(t *testing.T) {
	t.Parallel()
	vcs := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		ok     bool
		want   string
	}{
		{"linked", "v9.9.9", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("vcs.revision", "abc")}, true, "v9.9.9"},
		{"linked, no build info", "abc123-image", nil, false, "abc123-image"},
		{"no build info", "", nil, false, "devel"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("vcs.revision", "abc")}, true, "v1.2.3"},
		{"revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "abc123", "vcs.modified", "false")}, true, "abc123"},
		{"modified tree", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "abc123", "vcs.modified", "true")}, true, "abc123+dirty"},
		{"pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261207080713-38db16831491+dirty"}, Settings: vcs("vcs.revision", "38db16831491f4f8493ac99e03e893b54d99a037", "vcs.modified", "true")}, true, "v0.0.0-20261207080713-38db16831491+dirty"},
		{"linked over a pseudo-version", "v0.1.0-3-g38db168", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.1-0.20261207080713-38db16831491"}}, true, "v0.1.0-3-g38db168"},
		{"full revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "38db16831491f4f8493ac99e03e893b54d99a037")}, true, "38db16831491"},
		{"no module version", "", &debug.BuildInfo{Settings: vcs("vcs.revision", "38db16831491f4f8493ac99e03e893b54d99a037", "vcs.modified", "true")}, true, "38db16831491+dirty"},
		{"nothing known", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel"},
		{"-buildvcs=false", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("-buildmode", "exe")}, true, "devel"},
	}
	for _, tt := range tests {
		if got := versionOf(tt.linked, tt.bi, tt.ok); got != tt.want {
			t.Errorf("%s: versionOf = %q; want %q", tt.name, got, tt.want)
		}
	}
}

// TestLinkedVersion: a binary built as the image builds it, with the
// version given to the linker and no version control information, reports
// that version.
func TestLinkedVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "toolsvc")
	args := []string{"build", "-buildvcs=false", "-ldflags", "-X main.buildVersion=v0.0.0-linked-test", "-o", bin}
	if raceEnabled {
		// The packages then come from the build cache the test binary filled.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "toolsvc v0.0.0-linked-test" {
		t.Errorf("-version: %q, %v; want toolsvc v0.0.0-linked-test", out, err)
	}
}

// TestRunReadsOnlyItsEnvironment: run() takes its settings from the
// environment it is given, never from the process's, which is what lets
// the tests run many services in one process. A misspelt TOOLSVC_ variable
// in the process environment would stop a service that read it. Not
// parallel: it sets the process environment.
func TestRunReadsOnlyItsEnvironment(t *testing.T) {
	t.Setenv("TOOLSVC_API_KEY", "a typo that would stop start-up")
	t.Setenv("TOOLSVC_MAX_BODY_BYTES", "1")
	s := startServer(t, nil)
	mustSucceed(t, s.invoke(t, "list_dir", `{}`)) // a body of 2 bytes, over the process's limit
	if err := startError(t, map[string]string{"API_KEY": "x"}); err == nil || !strings.Contains(err.Error(), "did you mean TOOLSVC_API_KEYS") {
		t.Errorf("a misspelt variable in the environment given: %v", err)
	}
}

// TestLookupIn: the first entry of a name counts, as for os.LookupEnv; an
// entry without "=" is no variable.
func TestLookupIn(t *testing.T) {
	t.Parallel()
	get := lookupIn([]string{"A=1", "B=", "A=2", "C", "D=x=y"})
	for _, tt := range []struct {
		name, want string
		ok         bool
	}{{"A", "1", true}, {"B", "", true}, {"C", "", false}, {"D", "x=y", true}, {"E", "", false}} {
		if v, ok := get(tt.name); v != tt.want || ok != tt.ok {
			t.Errorf("%s: got %q %v, want %q %v", tt.name, v, ok, tt.want, tt.ok)
		}
	}
}
