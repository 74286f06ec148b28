package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestCommandLine runs the built binary: -h answers on stdout
// and exit 0; a wrong flag or argument prints the usage on stderr and
// exits 1.
func TestCommandLine(t *testing.T) {
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
		{args: []string{"-nope"}, code: 1, stderr: "TOOLSVC_ADDR"},
		{args: []string{"serve"}, code: 1, stderr: "unexpected argument \"serve\""},
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
