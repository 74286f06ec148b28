package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPortInUse runs the built binary twice on one port: the second exits
// 1 with a message that names the address taken and says what to do (use
// another port, or find the program that holds it), not only the bind
// error.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	// A free port: take one and give it back to the first service.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)

	first := portCommand(t, bin, addr)
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), `"listening"`) {
				found = true
				listening <- true
			}
		}
		if !found {
			listening <- false
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatal("the first service ended without listening")
		}
	case <-time.After(time.Minute):
		t.Fatal("the first service did not listen within a minute")
	}

	second := portCommand(t, bin, addr)
	var stderr bytes.Buffer
	second.Stderr = &stderr
	err = second.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second service on %s: %v, want exit status 1; stderr: %s", addr, err, stderr.String())
	}
	msg := stderr.String()
	for _, want := range []string{
		"toolsvc: TOOLSVC_ADDR: " + addr + " is already in use by another program",
		"Next: choose another port, e.g. TOOLSVC_ADDR=127.0.0.1:",
		"ss -ltnp 'sport = :" + port + "'",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}
}

// portCommand is the service binary set to listen on addr, with folders
// of its own.
func portCommand(t *testing.T, bin, addr string) *exec.Cmd {
	dir := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"TOOLSVC_ADDR=" + addr,
		"TOOLSVC_WORKSPACE=" + filepath.Join(dir, "ws"),
		"TOOLSVC_DATA_DIR=" + filepath.Join(dir, "data"),
		"TOOLSVC_LOG_LEVEL=info",
	}
	return cmd
}
