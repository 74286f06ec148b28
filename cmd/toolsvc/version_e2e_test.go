package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gitState is what the version rules read from the checkout.
type gitState struct {
	head     string    // HEAD's full hash
	time     time.Time // HEAD's committer time
	modified bool      // git status --porcelain lists anything (untracked files too, as for the go command)
	headTags []string  // tags on HEAD
	merged   []string  // tags on HEAD or its ancestors
	describe string    // git describe --tags --always --dirty
}

// readGit reads the checkout's state, or skips when there is no git or
// no repository (a source archive).
func readGit(t *testing.T) gitState {
	t.Helper()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			notTested(t, "git %s: %v (no git, or the source is not a git checkout)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	var s gitState
	git("rev-parse", "--git-dir")
	s.head = git("rev-parse", "HEAD")
	sec, err := strconv.ParseInt(git("log", "-1", "--format=%ct", "HEAD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	s.time = time.Unix(sec, 0).UTC()
	s.modified = git("status", "--porcelain") != ""
	s.headTags = strings.Fields(git("tag", "--points-at", "HEAD"))
	s.merged = strings.Fields(git("tag", "--merged", "HEAD"))
	s.describe = git("describe", "--tags", "--always", "--dirty")
	return s
}

// semver is a tag the go command takes as a version of this module:
// vMAJOR.MINOR.PATCH[-PRERELEASE], major 0 or 1 (the module path has no
// /vN suffix, so v2 and later tags are not its versions).
type semver struct {
	tag                 string
	major, minor, patch int
	pre                 string
}

func parseSemver(tag string) (semver, bool) {
	rest, ok := strings.CutPrefix(tag, "v")
	if !ok || strings.Contains(rest, "+") {
		return semver{}, false
	}
	core, pre, _ := strings.Cut(rest, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return semver{}, false
	}
	v := semver{tag: tag, pre: pre}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return semver{}, false
		}
		*[]*int{&v.major, &v.minor, &v.patch}[i] = n
	}
	return v, v.major <= 1
}

// highest is the highest version among tags, by semantic versioning's
// order (prerelease identifiers compared as whole strings, enough for the
// tags this repository uses: rc.1, beta.2).
func highest(tags []string) (semver, bool) {
	var vs []semver
	for _, tag := range tags {
		if v, ok := parseSemver(tag); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return semver{}, false
	}
	return slices.MaxFunc(vs, func(a, b semver) int {
		for _, d := range []int{a.major - b.major, a.minor - b.minor, a.patch - b.patch} {
			if d != 0 {
				return d
			}
		}
		switch {
		case a.pre == b.pre:
			return 0
		case a.pre == "":
			return 1
		case b.pre == "":
			return -1
		}
		return strings.Compare(a.pre, b.pre)
	}), true
}

// goVersion is the version the go command stamps into a build of s (rule
// 2 of versionOf): the highest version tag on HEAD, else a pseudo-version
// after the highest version tag HEAD descends from, with "+dirty" for a
// modified tree.
func goVersion(s gitState) string {
	dirty := ""
	if s.modified {
		dirty = "+dirty"
	}
	if v, ok := highest(s.headTags); ok {
		return v.tag + dirty
	}
	stamp := s.time.Format("20060102150405") + "-" + s.head[:12]
	base, ok := highest(s.merged)
	switch {
	case !ok:
		return "v0.0.0-" + stamp + dirty
	case base.pre != "":
		return base.tag + ".0." + stamp + dirty
	default:
		return fmt.Sprintf("v%d.%d.%d-0.%s%s", base.major, base.minor, base.patch+1, stamp, dirty)
	}
}

// TestVersionFromGit builds the service from this checkout the two ways
// it is built, and checks what toolsvc version, GET / and the listening
// log line report against git: a plain go build stamped by the go command
// (the tag, or Go's pseudo-version of the commit), and a build as the
// image and the scripts make it, with -buildvcs=false and git describe
// given to the linker. Other work may change the tree while the binaries
// build; the commit must match, and "dirty" too unless the tree's state
// changed meanwhile.
func TestVersionFromGit(t *testing.T) {
	t.Parallel()
	before := readGit(t)
	stamped := buildVersioned(t, "-buildvcs=true")
	linked := buildVersioned(t, "-buildvcs=false", "-ldflags", "-X main.buildVersion="+before.describe)
	after := readGit(t)
	if before.head != after.head || !slices.Equal(before.merged, after.merged) {
		t.Skipf("HEAD or the tags changed while the binaries were built (%s, then %s)", before.describe, after.describe)
	}
	want := map[string][]string{
		stamped: {goVersion(before), goVersion(after)},
		linked:  {before.describe, after.describe},
	}
	for _, bin := range []string{stamped, linked} {
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("%s version: %v", bin, err)
		}
		got, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "toolsvc ")
		if !ok || !slices.Contains(want[bin], got) {
			t.Errorf("%s version printed %q; want toolsvc and one of %q", filepath.Base(filepath.Dir(bin)), out, want[bin])
			continue
		}
		t.Logf("%s: toolsvc version: %s", filepath.Base(filepath.Dir(bin)), got)
		if front, logged := serveVersion(t, bin); front != got || logged != got {
			t.Errorf("%s: GET / reports version %q, the listening line %q; toolsvc version printed %q", filepath.Base(filepath.Dir(bin)), front, logged, got)
		}
	}
}

// buildVersioned builds the service with the go build flags given, into
// a folder named after them.
func buildVersioned(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), strings.Trim(flags[0], "-"), "toolsvc")
	args := append([]string{"build", "-o", bin}, flags...)
	if raceEnabled {
		// The packages then come from the build cache the test binary filled.
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// serveVersion starts bin as a service and returns the version GET /
// reports (as JSON) and the one its listening line has.
func serveVersion(t *testing.T, bin string) (front, logged string) {
	t.Helper()
	r, w := io.Pipe()
	logs := &syncBuffer{}
	cmd := exec.Command(bin)
	cmd.Env = environ(testVars(t, nil), nil, os.Environ()...)
	cmd.Stdout, cmd.Stderr = w, logs
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); w.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	addr, finished := watchLog(r, logs)
	select {
	case a := <-addr:
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+a+"/", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var idx struct{ Version string }
		if err := json.NewDecoder(resp.Body).Decode(&idx); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /: %d %v", resp.StatusCode, err)
		}
		front = idx.Version
	case <-finished:
		t.Fatalf("the service ended before it listened:\n%s", logs)
	case <-time.After(startGuard):
		t.Fatalf("the service did not listen within %v:\n%s", startGuard, logs)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		var l struct{ Message, Version string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "listening" {
			logged = l.Version
		}
	}
	return front, logged
}

// TestVersionSubcommand: toolsvc version prints what -version prints,
// reads no settings (a misspelt one does not stop it), and takes no
// arguments.
func TestVersionSubcommand(t *testing.T) {
	t.Parallel()
	var flagOut, cmdOut strings.Builder
	if err := run(t.Context(), []string{"-version"}, nil, &flagOut, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"version"}, []string{"TOOLSVC_NO_SUCH_SETTING=1"}, &cmdOut, io.Discard); err != nil {
		t.Fatal(err)
	}
	if cmdOut.String() != flagOut.String() || cmdOut.String() != "toolsvc "+version()+"\n" {
		t.Errorf("toolsvc version printed %q, -version %q; want toolsvc %s", cmdOut.String(), flagOut.String(), version())
	}
	if err := run(t.Context(), []string{"version", "extra"}, nil, io.Discard, io.Discard); err == nil {
		t.Error("toolsvc version extra: no error")
	}
}
