// Command attack tries one thing a confined command must not be able to
// do, and prints ALLOWED or DENIED with the reason. The sandbox tests build
// it into the workspace and run it inside each sandbox mode. Every probe is
// harmless when it succeeds: reboot and kexec are called with arguments
// the kernel rejects after the permission check, so EPERM means refused
// and any other answer means the call would have gone through.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: attack PROBE [ARGS]")
		os.Exit(2)
	}
	arg := func(i int) string {
		if len(os.Args) > i {
			return os.Args[i]
		}
		return ""
	}
	var err error
	switch os.Args[1] {
	case "tcp": // tcp HOST:PORT
		err = dialSend("tcp", arg(2))
	case "udp": // udp HOST:PORT
		err = sendUDP(arg(2))
	case "mptcp": // mptcp PORT
		err = rawConnect(unix.AF_INET, unix.SOCK_STREAM, 262, arg(2))
	case "sctp": // sctp PORT
		err = rawConnect(unix.AF_INET, unix.SOCK_STREAM, 132, arg(2))
	case "unix": // unix PATH (a leading @ means an abstract name)
		err = dialSend("unix", arg(2))
	case "raw":
		_, err = socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	case "packet":
		_, err = socket(unix.AF_PACKET, unix.SOCK_RAW, 0x0300)
	case "vsock": // the virtual machine's host: having the socket at all is the way out
		_, err = socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	case "netlink": // the kernel's audit log, not per network namespace
		_, err = socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)
	case "mknod": // mknod PATH
		err = unix.Mknod(arg(2), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))
	case "reboot":
		// Wrong magic: EINVAL once CAP_SYS_BOOT is granted.
		_, _, e := unix.Syscall6(unix.SYS_REBOOT, 0, 0, 0, 0, 0, 0)
		err = refusedIf(e)
	case "kexec":
		_, _, e := unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 1<<31, 0, 0)
		err = refusedIf(e)
	case "module":
		_, _, e := unix.Syscall(unix.SYS_INIT_MODULE, 0, 0, uintptr(unsafe.Pointer(&[]byte{0}[0])))
		err = refusedIf(e)
	case "mount": // mount DIR
		err = unix.Mount("none", arg(2), "tmpfs", 0, "")
	case "ptrace": // ptrace PID
		pid, _ := strconv.Atoi(arg(2))
		err = unix.PtraceAttach(pid)
	case "read": // read PATH: prints what it read
		err = readFile(arg(2))
	case "ls": // ls DIR
		err = list(arg(2))
	case "alloc": // alloc MiB: allocates and touches that much memory
		n, _ := strconv.Atoi(arg(2))
		alloc(n)
	default:
		fmt.Println("unknown probe", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Println("DENIED:", err)
		return
	}
	fmt.Println("ALLOWED")
}

// readFile prints what it read of path.
func readFile(path string) error {
	b, err := os.ReadFile(path)
	if err == nil {
		fmt.Printf("READ %q\n", b)
	}
	return err
}

// list prints the names in dir.
func list(dir string) error {
	var names []string
	d, err := os.ReadDir(dir)
	for _, e := range d {
		names = append(names, e.Name())
	}
	if err == nil {
		fmt.Printf("LIST %s\n", strings.Join(names, " "))
	}
	return err
}

// alloc allocates and touches n MiB of memory.
func alloc(n int) {
	buf := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(j)
		}
		buf = append(buf, b)
	}
	fmt.Println("allocated", len(buf), "MiB")
}

func refusedIf(e syscall.Errno) error {
	if e == unix.EPERM {
		return e
	}
	return nil
}

func socket(domain, typ, proto int) (int, error) {
	return unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
}

func dialSend(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("ESCAPED\n"))
	return err
}

func sendUDP(addr string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		if _, err := c.Write([]byte("ESCAPED\n")); err != nil {
			return err
		}
	}
	return nil
}

func rawConnect(domain, typ, proto int, port string) error {
	fd, err := socket(domain, typ, proto)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	p, _ := strconv.Atoi(port)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: p, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte("ESCAPED\n"))
	return err
}
