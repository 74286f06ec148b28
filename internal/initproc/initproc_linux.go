package initproc

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the init passes on to the service: those an
// operator or a container engine sends to stop, reload or signal it.
// Signals raised by a fault of the init itself, and SIGCHLD, are not.
var forwarded = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT,
}

// Run does nothing and reports false unless the calling process is PID 1.
// As PID 1 it starts the same program again as its child, with the same
// arguments, environment and standard streams, in a process group of its
// own, then stays as an init until that child ends: it passes the
// forwarded signals on to it and reaps every process that becomes its
// child. It then reports true and the status to exit with: the child's,
// or 128 and the number of the signal that killed it. When the child
// cannot be started it says so on errOut and reports false: the service
// then runs as PID 1 itself.
func Run(errOut io.Writer) (ran bool, status int) {
	if os.Getpid() != 1 {
		return false, 0
	}
	return run(errOut)
}

func run(errOut io.Writer) (bool, int) {
	// Its memory and /proc/<pid>/environ hold the service's secrets too:
	// not readable by the commands of the same account, as the service's
	// own are not.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, forwarded...)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	exe, err := os.Executable()
	if err != nil {
		exe = "/proc/self/exe"
	}
	p, err := os.StartProcess(exe, os.Args, &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{open(os.Stdin), open(os.Stdout), open(os.Stderr)},
		// Its own group: a terminal's Ctrl-C reaches it once, through
		// the init, not twice.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		signal.Reset(append(forwarded, syscall.SIGCHLD)...)
		fmt.Fprintln(errOut, startFailed(err))
		return false, 0
	}
	child := p.Pid
	// The init never waits through p: every child is reaped below.
	_ = p.Release()
	// A SIGCHLD can be merged with another or dropped while the channel
	// is full: a slow tick reaps whatever was missed.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			_ = unix.Kill(child, sig.(syscall.Signal))
			continue
		case <-children:
		case <-tick.C:
		}
		if ended, status := reap(child); ended {
			return true, status
		}
	}
}

// reap collects every child that has ended, and reports whether one was
// the service, with the status the init exits with. Once the service has
// ended, the orphans it left may still be ending: they are given a moment
// to be collected too before the init ends (which ends them anyway).
func reap(service int) (bool, int) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return false, 0
		}
		if pid == service {
			status := exitStatus(ws.ExitStatus(), ws.Signaled(), int(ws.Signal()))
			reapRest(100 * time.Millisecond)
			return true, status
		}
	}
}

// open returns f, or nil (the child gets it closed) when its descriptor
// is not open.
func open(f *os.File) *os.File {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return nil
	}
	return f
}

// exitStatus is the status an init ends with for a child that ended with
// status code or, when signaled is set, was killed by signal sig: the
// shell's convention, 128 and the signal's number.
func exitStatus(code int, signaled bool, sig int) int {
	if signaled {
		return 128 + sig
	}
	return code
}

// startFailed says why the service runs as PID 1 itself, for its log.
func startFailed(err error) string {
	return fmt.Sprintf("toolsvc: running as PID 1 without an init of its own (starting the service as its child failed: %v); "+
		"processes left behind by commands and the browser will not be reaped: run it under an init (docker run --init, tini)", err)
}

// reapRest collects the children left, for at most d.
func reapRest(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR || pid > 0:
		case err != nil: // ECHILD: none left
			return
		default:
			time.Sleep(5 * time.Millisecond)
		}
	}
}
