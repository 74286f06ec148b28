package initproc

import (
	"bytes"
	"testing"
)

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		code     int
		signaled bool
		sig      int
		want     int
	}{
		{0, false, 0, 0},
		{3, false, 0, 3},
		{-1, true, 9, 137},
		{-1, true, 15, 143},
	} {
		if got := exitStatus(c.code, c.signaled, c.sig); got != c.want {
			t.Errorf("exitStatus(%d, %v, %d) = %d, want %d", c.code, c.signaled, c.sig, got, c.want)
		}
	}
}

// TestRunNotPID1: anywhere but PID 1, Run does nothing. (As PID 1 it is
// tried through the real binary: cmd/toolsvc's TestPID1ReapsOrphans.)
func TestRunNotPID1(t *testing.T) {
	var out bytes.Buffer
	if ran, _ := Run(&out); ran || out.Len() > 0 {
		t.Errorf("Run outside PID 1: ran %v, said %q", ran, out.String())
	}
}
