package customtools

import (
	"testing"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// TestExecSandboxes: exec's own sandbox serves its network setting; the
// other setting gets one sandbox like it, made once, with the same mode.
func TestExecSandboxes(t *testing.T) {
	opts := sandbox.Options{Mode: sandbox.None, Workspace: t.TempDir()}
	own, err := sandbox.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	x := NewExecSandboxes(own, opts)
	defer x.Close()
	if sb, err := x.For(false); err != nil || sb != own {
		t.Fatalf("For(false) = %v, %v; want exec's own", sb, err)
	}
	on, err := x.For(true)
	if err != nil {
		t.Fatal(err)
	}
	if on == own || !on.Network() || on.Mode() != own.Mode() {
		t.Errorf("For(true): network %v, mode %s", on.Network(), on.Mode())
	}
	if again, _ := x.For(true); again != on {
		t.Error("For(true) made another sandbox")
	}
}
