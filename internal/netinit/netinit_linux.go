package netinit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// AddrString is where the listener is: the sandbox's EgressAddr, named
// here too so that this package needs nothing of the sandbox's.
const AddrString = "127.0.0.1:3128"

// Run does nothing and reports false unless the process was started
// with Args's marker. It then does what the package says and executes the
// command, so that it returns only when something failed: it says what
// on errOut and reports true and the status to exit with (127, as a shell
// does for a command it could not run). Call it first thing in main,
// before anything starts goroutines of its own or opens files.
func Run(errOut io.Writer) (ran bool, status int) {
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[1], flagName) {
		return false, 0
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(errOut, "toolsvc: starting the command in its network namespace: %v\n", err)
	}
	return true, 127
}

func run(args []string) error {
	fd, err := strconv.Atoi(strings.TrimPrefix(args[0], flagName))
	if err != nil || fd < 3 || len(args) < 3 || args[1] != "--" {
		return errors.New("usage: " + flagName + "FD -- PROGRAM [ARGUMENT...]")
	}
	argv := args[2:]
	// Capabilities are a thread's, and so is what execve hands on: every
	// step below runs on this thread, and the command is executed from it.
	runtime.LockOSThread()
	if err := loopbackUp(); err != nil {
		return err
	}
	ln, err := listen()
	if err != nil {
		return err
	}
	err = handOver(fd, ln)
	unix.Close(ln)
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}

// loopbackUp brings the namespace's loopback up unless it is (bubblewrap
// brings it up in the namespace it makes).
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing loopback up: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing loopback up: reading its flags: %w", err)
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing loopback up: %w", err)
	}
	return nil
}

// listen makes the listening socket on AddrString, close-on-exec: the
// command does not get it.
func listen() (int, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("listening on %s: %w", AddrString, err)
	}
	err = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err == nil {
		err = unix.Bind(s, &unix.SockaddrInet4{Port: 3128, Addr: [4]byte{127, 0, 0, 1}})
	}
	if err == nil {
		err = unix.Listen(s, unix.SOMAXCONN)
	}
	if err != nil {
		unix.Close(s)
		return -1, fmt.Errorf("listening on %s: %w", AddrString, err)
	}
	return s, nil
}

// handOver sends the listener over the socket fd, in one message.
func handOver(fd, ln int) error {
	if err := unix.Sendmsg(fd, []byte{0}, unix.UnixRights(ln), nil, 0); err != nil {
		return fmt.Errorf("handing the listener over: %w", err)
	}
	return nil
}

// dropCapabilities leaves the thread none to hand on: the bounding set
// emptied (with CAP_SETPCAP, which the sandbox gives the process where it
// makes the namespaces; under bubblewrap it has none to drop), the ambient
// and inheritable sets cleared. The command, whose user is not root in
// the namespace (it maps no account), then gets none at execve, and
// no_new_privs keeps set-user-ID and file capabilities from adding any.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; c <= lastCap(); c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
			}
		}
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing capabilities: %w", err)
	}
	return nil
}

// lastCap is the highest capability number the kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return unix.CAP_LAST_CAP
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return unix.CAP_LAST_CAP
	}
	return n
}

// Pair returns a connected pair of sockets for the hand-over: the
// service's end, and the end the command inherits (Args's fd). Both are
// close-on-exec; os/exec hands the command's end on as ExtraFiles.
func Pair() (service, command *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "netinit-service"), os.NewFile(uintptr(fds[1]), "netinit-command"), nil
}

// Receive waits until deadline for the listener the command's first
// program hands over on sock (the service's end of Pair, whose other end
// the service has closed once the command started), and returns it. It
// fails when the program ended first, or handed over anything but a
// listener on AddrString. sock is left open: it is the caller's.
func Receive(sock *os.File, deadline time.Time) (net.Listener, error) {
	c, err := net.FileConn(sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("the hand-over socket is a %T", c)
	}
	if err := uc.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if errors.Is(err, io.EOF) {
		n, oobn, err = 0, 0, nil
	}
	if err != nil {
		return nil, fmt.Errorf("waiting for the listener: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if r, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, r...)
			}
		}
	}
	if n == 0 && len(fds) == 0 {
		return nil, errors.New("the command's first program ended without handing over its listener")
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("%d descriptors handed over, want one listener", len(fds))
	}
	f := os.NewFile(uintptr(fds[0]), "egress")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("the descriptor handed over: %w", err)
	}
	if got := ln.Addr().String(); got != AddrString {
		ln.Close()
		return nil, fmt.Errorf("the listener handed over is on %s, want %s", got, AddrString)
	}
	return ln, nil
}
