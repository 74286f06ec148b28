package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDrainCommand runs the built binary's drain subcommand, as a pre-stop
// hook does, against a service with a call running: it does not exit while
// the call runs, exits 0 once it has returned, and exits 1 when -timeout
// passes first.
func TestDrainCommand(t *testing.T) {
	t.Parallel()
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil, withKey("drain-test-key-0123456789abcdef"))
	addr := strings.TrimPrefix(s.URL, "http://")
	drainCmd := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, append([]string{"drain", "-settle", "0", "-poll", "20ms"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TOOLSVC_ADDR=" + addr}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd, &out
	}

	// Idle: drained at once.
	cmd, out := drainCmd("-timeout", "30s")
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "drained: no call running") {
		t.Fatalf("idle service: %v %s", err, out)
	}

	// A call that runs until the test releases it.
	release := filepath.Join(s.Workspace, "release")
	done := make(chan string, 1)
	go func() {
		res := s.invoke(t, "exec", map[string]any{"command": "while [ ! -e release ]; do sleep 0.02; done; echo finished > marker", "timeout": 60})
		done <- fmt.Sprintf("%+v", res)
	}()
	waitInFlight(t, s, 1, done)

	short, shortOut := drainCmd("-timeout", "200ms")
	var ee *exec.ExitError
	if err := short.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(shortOut.String(), "still not drained") {
		t.Fatalf("a call running past -timeout: %v %s", err, shortOut)
	}

	long, longOut := drainCmd("-timeout", "2m")
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- long.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("drain exited while a call runs: %v %s", err, longOut)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil || !strings.Contains(longOut.String(), "drained: no call running") {
		t.Fatalf("after the call returned: %v %s", err, longOut)
	}
	// The slot is given back only once the tool has returned.
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "marker")); err != nil || string(b) != "finished\n" {
		t.Fatalf("drain ended before the call did: %q %v", b, err)
	}
	if res := <-done; !strings.Contains(res, "success") {
		t.Errorf("the call: %s", res)
	}
}

// waitInFlight waits until /readyz, asked on loopback, counts n calls; it
// fails the test if the call ends first.
func waitInFlight(t *testing.T, s *testServer, n int, done <-chan string) {
	t.Helper()
	for {
		select {
		case res := <-done:
			t.Fatalf("the call ended before the count reached %d: %s", n, res)
		default:
		}
		resp, err := http.Get(s.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			InFlight *int `json:"in_flight"`
		}
		err = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if err != nil || b.InFlight == nil {
			t.Fatalf("/readyz on loopback without in_flight: %v", err)
		}
		if *b.InFlight == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
