package netinit

import (
	"io"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestArgs: the marker comes first, as an option a program that does not
// run Run rejects, then the command after "--".
func TestArgs(t *testing.T) {
	got := Args("/proc/self/exe", 4, []string{"/bin/sh", "-c", "echo hi"})
	want := []string{"/proc/self/exe", "-toolsvc-netinit=4", "--", "/bin/sh", "-c", "echo hi"}
	if !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
	if ran, _ := Run(io.Discard); ran {
		t.Error("Run ran without the marker")
	}
}

// TestReceive: the service's end gets a listener on the proxy's address
// handed over, refuses anything else, and reports a program that ended
// without handing one over. Everything runs on one thread with a network
// namespace of its own: locked and never unlocked, it ends with its
// goroutine, and the test binary's other threads keep the host's.
func TestReceive(t *testing.T) {
	cases := []struct {
		name string
		send func(fd int) error
		ok   bool
	}{
		{"listener", func(fd int) error {
			if err := loopbackUp(); err != nil {
				return err
			}
			ln, err := listen()
			if err != nil {
				return err
			}
			defer unix.Close(ln)
			return handOver(fd, ln)
		}, true},
		{"not a listener", func(fd int) error {
			f, err := os.Open("/dev/null")
			if err != nil {
				return err
			}
			defer f.Close()
			return handOver(fd, int(f.Fd()))
		}, false},
		{"nothing", func(fd int) error { return nil }, false},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Logf("no network namespace of the test's own (%v): not tried", err)
			return
		}
		for _, c := range cases {
			mine, theirs, err := Pair()
			if err != nil {
				t.Error(err)
				return
			}
			if err := c.send(int(theirs.Fd())); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			theirs.Close()
			ln, err := Receive(mine, time.Now().Add(5*time.Second))
			mine.Close()
			if (err == nil) != c.ok {
				t.Errorf("%s: Receive: %v, want success %v", c.name, err, c.ok)
			}
			if ln != nil {
				if got := ln.Addr().String(); got != AddrString {
					t.Errorf("%s: listener on %s", c.name, got)
				}
				ln.Close()
			}
		}
	}()
	<-done
}
