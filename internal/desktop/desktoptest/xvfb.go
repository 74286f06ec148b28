// Package desktoptest starts a private Xvfb X server for tests of desktop
// capture.
package desktoptest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// RequireOrSkip skips the test when the dependency is missing, except
// under CI (CI=true), where a missing dependency fails it: CI installs
// everything these tests need.
func RequireOrSkip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the CI image must provide it)", msg)
	}
	t.Skip(msg)
}

// Xvfb starts an Xvfb server with the given screens ("640x480x24"), joined
// by Xinerama into one desktop, sets DISPLAY for the test and returns the
// display name. It is stopped when the test ends. Without Xvfb the test is
// skipped (failed under CI).
func Xvfb(t testing.TB, screens ...string) string {
	t.Helper()
	return start(t, true, screens)
}

// XvfbResetting is Xvfb without -noreset, as xvfb-run and a plain "Xvfb :99"
// start it: the server resets itself each time its last client goes.
func XvfbResetting(t testing.TB, screens ...string) string {
	t.Helper()
	return start(t, false, screens)
}

func start(t testing.TB, noreset bool, screens []string) string {
	t.Helper()
	bin, err := exec.LookPath("Xvfb")
	if err != nil {
		RequireOrSkip(t, "Xvfb is not installed (Debian: apt-get install xvfb)")
	}
	if len(screens) == 0 {
		screens = []string{"640x480x24"}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// -displayfd lets Xvfb pick a free display number and tell it.
	args := []string{"-displayfd", "3", "-nolisten", "tcp"}
	if noreset {
		args = append(args, "-noreset")
	}
	for i, s := range screens {
		args = append(args, "-screen", fmt.Sprint(i), s)
	}
	if len(screens) > 1 {
		args = append(args, "+xinerama")
	}
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		w.Close()
		r.Close()
		t.Fatalf("starting Xvfb: %v", err)
	}
	w.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	num := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		r.Close()
		num <- strings.TrimSpace(line)
	}()
	var n string
	select {
	case n = <-num:
	case <-time.After(20 * time.Second):
		t.Fatal("Xvfb did not report its display number within 20s")
	}
	if n == "" {
		t.Fatal("Xvfb exited without reporting a display number")
	}
	display := ":" + n
	t.Setenv("DISPLAY", display)
	t.Setenv("XDG_SESSION_TYPE", "x11")
	return display
}

// FillRoot paints the whole root window of display with one colour
// (0xRRGGBB on a 24-bit TrueColor screen), so a capture of it has known
// content.
func FillRoot(t testing.TB, display string, rgb uint32) {
	t.Helper()
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatalf("connecting to %s: %v", display, err)
	}
	defer c.Close()
	root := xproto.Setup(c).DefaultScreen(c).Root
	if err := xproto.ChangeWindowAttributesChecked(c, root, xproto.CwBackPixel, []uint32{rgb}).Check(); err != nil {
		t.Fatalf("setting the root background: %v", err)
	}
	if err := xproto.ClearAreaChecked(c, false, root, 0, 0, 0, 0).Check(); err != nil {
		t.Fatalf("clearing the root window: %v", err)
	}
	// A round trip makes sure the server has painted before we return.
	if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
		t.Fatal(err)
	}
}
