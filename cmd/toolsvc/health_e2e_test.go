package main

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
)

// TestHealthCommand runs the built binary's health subcommand, as a
// container's HEALTHCHECK does: exit 0 against a running service (with
// API keys set, since /healthz needs none; and through a wildcard
// listening address), exit 1 when nothing listens or the answer is not ok.
func TestHealthCommand(t *testing.T) {
	t.Parallel()
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	// A key of the service's own is no help to the check: /healthz is open.
	s := startServer(t, map[string]string{"API_KEYS": "health-check-test-key-0123456789"})
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]

	// A port nothing listens on: take one and give it back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	unhealthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"shutting_down","message":"shutting down"}}`))
	}))
	defer unhealthy.Close()
	notOK := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"starting"}`))
	}))
	defer notOK.Close()

	tests := []struct {
		name, addr string
		args       []string
		code       int
		stdout     string
		stderr     string
	}{
		{name: "running", addr: strings.TrimPrefix(s.URL, "http://"), stdout: "ok http://127.0.0.1:" + port + "/healthz " + version()},
		{name: "wildcard address asks loopback", addr: "0.0.0.0:" + port, stdout: "ok http://127.0.0.1:" + port + "/healthz"},
		{name: "empty host asks loopback", addr: ":" + port, stdout: "ok http://127.0.0.1:" + port + "/healthz"},
		{name: "nothing listening", addr: closed, code: 1, stderr: "connection refused"},
		{name: "503", addr: strings.TrimPrefix(unhealthy.URL, "http://"), code: 1, stderr: "503 Service Unavailable"},
		{name: "200 but not ok", addr: strings.TrimPrefix(notOK.URL, "http://"), code: 1, stderr: `"starting"`},
		{name: "bad address", addr: "localhost", code: 1, stderr: "TOOLSVC_ADDR"},
		{name: "stray argument", addr: closed, args: []string{"now"}, code: 1, stderr: `unexpected argument "now"`},
		{name: "help", addr: closed, args: []string{"-h"}, stdout: "TOOLSVC_ADDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"health"}, tt.args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "TOOLSVC_ADDR=" + tt.addr}
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
			if tt.stdout != "" && !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout lacks %q: %s", tt.stdout, stdout.String())
			}
			if tt.stderr != "" && !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr lacks %q: %s", tt.stderr, stderr.String())
			}
			if tt.code == 0 && stderr.Len() > 0 {
				t.Errorf("stderr should be empty: %s", stderr.String())
			}
		})
	}
}

// TestHealthURL maps listening addresses to the address the check asks.
func TestHealthURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/healthz",
		":9000":          "http://127.0.0.1:9000/healthz",
		"[::]:8080":      "http://[::1]:8080/healthz",
		"[::1]:8080":     "http://[::1]:8080/healthz",
		"tools.lan:80":   "http://tools.lan:80/healthz",
	} {
		if got, err := localURL(addr, "/healthz"); err != nil || got != want {
			t.Errorf("localURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}
