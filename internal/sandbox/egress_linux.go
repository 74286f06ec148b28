package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/netinit"
)

// How a command with Options.Egress reaches the network only through the
// service's proxy.
//
// Where the service may make network namespaces (CAP_SYS_ADMIN, as root):
//
//   - The command's launching thread unshares its network namespace
//     before it confines itself (confineThread): a namespace holding only
//     a loopback interface, which the thread brings up. Every process the
//     thread starts is born in it, bubblewrap included (which is then not
//     asked to make one of its own).
//   - On that thread the service listens on EgressAddr: Go makes a
//     socket on the thread that asks for it, so the listener belongs to
//     the namespace, while the rest of the service, accepting on it from
//     any thread, stays in the host's. The listener is close-on-exec, as
//     every descriptor Go opens: the command does not inherit it.
//
// Elsewhere (a service that is not root, or root without CAP_SYS_ADMIN,
// as in a container) the command makes the namespace itself, in a user
// namespace of its own, where the kernel lets any process make one:
//
//   - In modes Landlock and None the command is cloned into a new user
//     and network namespace, and its first program is the service's own
//     binary (see package netinit), which holds CAP_NET_ADMIN there for
//     that one program: it brings loopback up, listens on EgressAddr,
//     hands the listener to the service over a socket it inherited, drops
//     every capability and executes the command. The user namespace maps
//     no account: the command is nobody there, with no capability, as in
//     the PID namespace of contain_linux.go.
//   - Under bubblewrap, which makes the network namespace with loopback up
//     itself (--unshare-net), the same first program only listens and
//     hands the listener over, from a path bubblewrap binds the binary to.
//
// Either way nothing else leads out: the namespace has no other
// interface, no route and so no resolver, and its abstract Unix sockets
// are its own. Sockets of the families a namespace does not confine (Unix
// by path, vsock, netlink) are refused by the seccomp filter (see
// socketRule), and where Landlock has network rules (ABI 4) a command may
// connect to the proxy's port only, and bind none (but the proxy's port,
// where its first program listens, which the listener keeps taken).
//
// The namespace ends when its last user does: the thread (which ends
// with its goroutine once the command has ended), the command's
// processes, the listener (closed when the Child is cleaned up) and the
// connections the caller accepted on it (the caller's to close).

// netinitPath is where bubblewrap shows the service's binary to the
// command's first program.
const netinitPath = "/run/toolsvc-netinit"

// netinitProbeVar is set in the environment of the process probeNetinit
// starts, and only there. A binary whose main does not run netinit.Run
// first runs as itself instead; if that makes a sandbox with Egress,
// New finds the variable and refuses at once rather than probe again,
// which would start the binary again, and so on.
const netinitProbeVar = "TOOLSVC_NETINIT_PROBE"

// netinitTimeout bounds the wait for a command's first program to hand
// its listener over; past it the command is killed and does not start.
const netinitTimeout = 10 * time.Second

// egressUnavailable wraps ErrEgressUnavailable with why and what to do.
func egressUnavailable(why error) error {
	return fmt.Errorf("%w: a network allowlist needs a network namespace per command, and %w. "+
		"Run the service as root (or with CAP_SYS_ADMIN), or allow user namespaces, or leave the allowlist unset", ErrEgressUnavailable, why)
}

// enterEgressNamespace gives the calling thread, which must be locked to
// its goroutine and never return to the Go runtime's pool, a network
// namespace of its own with loopback up, and listens on EgressAddr there.
// It needs CAP_SYS_ADMIN (to unshare) and CAP_NET_ADMIN in the thread's
// user namespace (to bring loopback up): the thread must not have dropped
// them yet.
func enterEgressNamespace() (net.Listener, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("unsharing the network namespace: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	return listenEgress()
}

// listenEgress listens on EgressAddr in the calling thread's network
// namespace. The network is tcp4, never tcp: Go would otherwise probe,
// once for the whole process, whether the system has IPv6, and the probe
// would be answered by this namespace. Multipath TCP is off for the same
// reason (its probe), and the proxy's clients need only TCP.
func listenEgress() (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", EgressAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s in the command's network namespace: %w", EgressAddr, err)
	}
	return ln, nil
}

// loopbackUp brings the loopback interface of the calling thread's
// network namespace up: a new namespace has it down, and with it
// 127.0.0.1 unreachable.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing loopback up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bringing loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing loopback up: reading its flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing loopback up: %w", err)
	}
	return nil
}

// landlockTCP reports whether Landlock can rule TCP here (ABI 4, Linux
// 6.7): which ports a command may connect to and bind.
func landlockTCP() bool {
	abi, err := llsys.LandlockGetABIVersion()
	return err == nil && abi >= 4
}

// chooseEgress finds, at start-up, how commands get their network
// namespace: made by their launching thread (it returns ""), or by their
// first program in a user namespace of their own (it returns the
// service's binary, which that program is). It tries each way once, on a
// thread or a process of its own.
func chooseEgress(opts Options) (netinitExe string, err error) {
	errThread := probeThread()
	if errThread == nil {
		return "", nil
	}
	if !errors.Is(errThread, unix.EPERM) {
		return "", egressUnavailable(errThread)
	}
	why := "the service may not make one (it lacks CAP_SYS_ADMIN)"
	switch {
	case os.Getenv(netinitProbeVar) != "":
		return "", egressUnavailable(fmt.Errorf("%s, and this process is the service's binary started as a command's first program, which did not run as one: its main must call netinit.Run first", why))
	case opts.User != nil:
		return "", egressUnavailable(fmt.Errorf("%s, and commands run as another account, which a user namespace of their own could not map", why))
	case opts.noUserns:
		return "", egressUnavailable(fmt.Errorf("%s, and user namespaces are turned off", why))
	}
	exe, err := os.Executable()
	if err != nil {
		return "", egressUnavailable(fmt.Errorf("%s, and the service's binary, which would make one in a user namespace, is not found: %w", why, err))
	}
	if err := probeNetinit(); err != nil {
		return "", egressUnavailable(fmt.Errorf("%s, nor could a command make one in a user namespace of its own: %w", why, err))
	}
	return exe, nil
}

// probeThread checks that a thread can make the namespace and listen in
// it, on a thread of its own that ends afterwards.
func probeThread() error {
	errc := make(chan error, 1)
	onDisposableThread(func() {
		ln, err := enterEgressNamespace()
		if err == nil {
			ln.Close()
		}
		errc <- err
	})
	return <-errc
}

// probeNetinit starts the service's binary as a command's first program,
// unconfined, in a user and network namespace of its own, with /bin/true
// as the command, and checks that it hands a listener over: that the
// kernel lets the service make these namespaces, and that the binary's
// main runs netinit.Run first.
func probeNetinit() error {
	mine, theirs, err := netinit.Pair()
	if err != nil {
		return err
	}
	defer mine.Close()
	argv := netinit.Args("/proc/self/exe", 3, []string{"/bin/true"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{netinitProbeVar + "=1"}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	netinitAttr(cmd.SysProcAttr)
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return err
	}
	ln, err := netinit.Receive(mine, time.Now().Add(netinitTimeout))
	if err != nil {
		_ = cmd.Process.Kill()
	} else {
		ln.Close()
	}
	werr := cmd.Wait()
	if err != nil {
		return fmt.Errorf("the service's binary, started as that program, did not hand a listener over (its main must call netinit.Run first): %w; it ended with %v, saying %q",
			err, cmd.ProcessState, strings.TrimSpace(out.String()))
	}
	if werr != nil {
		return fmt.Errorf("the command after it: %w: %s", werr, strings.TrimSpace(out.String()))
	}
	return nil
}

// netinitAttr has a command's process cloned into a user and a network
// namespace of its own, with CAP_NET_ADMIN (to bring loopback up) and
// CAP_SETPCAP (to empty its bounding set afterwards) kept across the
// execution of its first program (see package netinit).
func netinitAttr(attr *syscall.SysProcAttr) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	attr.AmbientCaps = append(attr.AmbientCaps, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP)
}

// netinitFD is the descriptor a command's first program hands its
// listener over on: the first after the standard streams and, under
// bubblewrap, its seccomp program.
func (s *Sandbox) netinitFD() int {
	if s.mode == Bwrap && s.seccomp != nil {
		return 4
	}
	return 3
}

// receiveEgress waits for the listener c's first program hands over on
// sock, and gives it to c; when none comes, it kills and reaps the
// command, and says why.
func (c *Child) receiveEgress(sock *os.File) error {
	ln, err := netinit.Receive(sock, time.Now().Add(netinitTimeout))
	if err != nil {
		c.kill()
		werr, _ := c.Wait()
		return fmt.Errorf("starting the command in a network namespace of its own: %w (%v)", err, werr)
	}
	c.egress = ln
	return nil
}

// Egress returns the listener the command reaches the service's proxy
// through, on EgressAddr inside the command's own network namespace, or
// nil when the sandbox was made without Options.Egress.
//
// The caller serves it for as long as the command runs: it accepts
// connections on it (from any goroutine) until Accept fails. The sandbox
// closes it when the Child is cleaned up (once Wait has returned; a
// Child that failed to start is never returned), which ends the caller's
// Accept loop; the caller need not close it, and closing it earlier only
// cuts the command off. Connections already accepted are the caller's:
// they stay open until it closes them.
func (c *Child) Egress() net.Listener { return c.egress }
