package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// How a command with Options.Egress reaches the network only through the
// service's proxy, where the service may make network namespaces
// (CAP_SYS_ADMIN, as root):
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
//   - Nothing else leads out: the namespace has no other interface, no
//     route and so no resolver, and its abstract Unix sockets are its
//     own. Sockets of the families a namespace does not confine (Unix by
//     path, vsock, netlink) are refused by the seccomp filter (see
//     socketRule), and where Landlock has network rules (ABI 4) a command
//     may connect to the proxy's port only, and bind none.
//
// The namespace ends when its last user does: the thread (which ends
// with its goroutine once the command has ended), the command's
// processes, the listener (closed when the Child is cleaned up) and the
// connections the caller accepted on it (the caller's to close).

// egressUnavailable wraps ErrEgressUnavailable with why and what to do.
func egressUnavailable(why error) error {
	return fmt.Errorf("%w: a network allowlist needs a network namespace per command, and %w. "+
		"Run the service as root (or with CAP_SYS_ADMIN), or leave the allowlist unset", ErrEgressUnavailable, why)
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

// probeEgress checks, at start-up, that a thread can make the namespace
// and listen in it, on a thread of its own that ends afterwards.
func probeEgress() error {
	errc := make(chan error, 1)
	onDisposableThread(func() {
		ln, err := enterEgressNamespace()
		if err == nil {
			ln.Close()
		}
		errc <- err
	})
	err := <-errc
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM):
		return egressUnavailable(fmt.Errorf("the service may not make one (%w: it lacks CAP_SYS_ADMIN)", err))
	}
	return egressUnavailable(err)
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
