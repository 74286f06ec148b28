package sandbox

import (
	"encoding/binary"
	"fmt"

	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// privileged are system calls no command needs and an attacker wants:
// changing mounts, loading kernel code, rebooting, reading or writing
// other processes' memory, kernel keyrings, clocks, and interfaces that
// carry out work the filter cannot see (io_uring runs its own socket and
// file operations). Capabilities already refuse most of them; the filter
// is a second wall that holds even where a capability slipped through.
var privileged = []string{
	"mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick",
	"swapon", "swapoff", "reboot", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"bpf", "perf_event_open", "userfaultfd", "lookup_dcookie", "quotactl", "quotactl_fd",
	"keyctl", "add_key", "request_key",
	"acct", "syslog", "vhangup",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"sethostname", "setdomainname", "iopl", "ioperm",
	"open_by_handle_at", "name_to_handle_at",
	"fanotify_init", "setns", "unshare",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"nfsservctl", "uselib", "create_module", "get_kernel_syms", "query_module",
}

// networkCalls are refused when the network is off and no network
// namespace keeps sockets apart: no socket of any family can be made
// (Unix sockets by path or abstract name lead out of the sandbox as surely
// as TCP does). socketpair stays: it makes a connected pair that reaches
// nothing else.
var networkCalls = []string{"socket"}

// socketRule says which sockets the filter lets a command make.
type socketRule struct {
	refuse bool     // socket() is refused...
	allow  []uint64 // ...unless its family is one of these
}

// socketRule returns what the filter refuses of socket() for this
// sandbox. With the network on, nothing. With it off, every socket where
// no network namespace keeps them apart (noSocketsWithoutNetns); where
// one does (bubblewrap's), every family it does not hold in, as with
// egress below. With egress, every family but IPv4 and IPv6, which the
// command's own network namespace confines: a namespace does not hold
// the others in. A Unix socket by path is a file any process that can
// reach it may connect to (Landlock below ABI 9 cannot refuse that),
// vsock reaches the virtual machine's host, and netlink families such as
// the kernel's audit and uevent ones are not per namespace. Under
// bubblewrap Unix sockets stay, as they do there with the network off:
// its mounts decide which socket files a command sees, and abstract ones
// are per network namespace.
func (s *Sandbox) socketRule(noSocketsWithoutNetns bool) socketRule {
	switch {
	case s.egress:
		allow := []uint64{unix.AF_INET, unix.AF_INET6}
		if s.mode == Bwrap {
			allow = append(allow, unix.AF_UNIX)
		}
		return socketRule{refuse: true, allow: allow}
	case s.network:
		return socketRule{}
	case noSocketsWithoutNetns:
		return socketRule{refuse: true}
	}
	// A namespace of its own keeps IPv4 and IPv6 in, and bubblewrap's
	// mounts the Unix sockets by path; vsock (the virtual machine's host)
	// and netlink are not per namespace.
	return socketRule{refuse: true, allow: []uint64{unix.AF_INET, unix.AF_INET6, unix.AF_UNIX}}
}

// filter is a compiled seccomp program.
type filter struct {
	prog []unix.SockFilter
}

// newFilter compiles the denylist. Calls the machine's architecture does
// not have are left out. Calls made through another architecture's
// convention (32-bit calls on a 64-bit kernel) are refused outright, so
// the list cannot be bypassed through them.
//
// sockets adds socket() to the list, or only for families sockets.allow
// does not name. The family is compared in all 64 bits of the register:
// a family with anything in its upper half, which the kernel would cut
// off, matches no allowed one and is refused.
func newFilter(sockets socketRule) (*filter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	names := existing(info, privileged)
	groups := []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: names}}
	switch {
	case sockets.refuse && len(sockets.allow) == 0:
		groups = append(groups, seccomp.SyscallGroup{Action: seccomp.ActionErrno, Names: existing(info, networkCalls)})
	case sockets.refuse:
		// One set of conditions, all of which must hold: the family is
		// none of the allowed ones.
		var notAllowed seccomp.ArgumentConditions
		for _, fam := range sockets.allow {
			notAllowed = append(notAllowed, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: fam})
		}
		var calls []seccomp.NameWithConditions
		for _, n := range existing(info, networkCalls) {
			calls = append(calls, seccomp.NameWithConditions{Name: n, Conditions: notAllowed})
		}
		groups = append(groups, seccomp.SyscallGroup{Action: seccomp.ActionErrno, NamesWithCondtions: calls})
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("assembling the seccomp filter: %w", err)
	}
	// The library lets calls of a foreign architecture through to its
	// default action (allow); refuse them before its program starts.
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.EPERM)},
	}
	raw, err := bpf.Assemble(append(guard, insts...))
	if err != nil {
		return nil, fmt.Errorf("assembling the seccomp filter: %w", err)
	}
	f := &filter{prog: make([]unix.SockFilter, len(raw))}
	for i, r := range raw {
		f.prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return f, nil
}

func existing(info *arch.Info, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := info.SyscallNames[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// load installs the filter on the calling thread only (no TSYNC): the
// service's other threads stay free, and a process the thread forks
// inherits the filter and keeps it across execve. no_new_privs must be set
// on the thread first.
func (f *filter) load() error {
	prog := unix.SockFprog{Len: uint16(len(f.prog)), Filter: &f.prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("installing the seccomp filter: %w", err)
	}
	return nil
}

// bytes returns the program as bubblewrap's --seccomp option reads it:
// struct sock_filter entries in the machine's byte order.
func (f *filter) bytes() []byte {
	out := make([]byte, 0, 8*len(f.prog))
	for _, s := range f.prog {
		out = binary.NativeEndian.AppendUint16(out, s.Code)
		out = append(out, s.Jt, s.Jf)
		out = binary.NativeEndian.AppendUint32(out, s.K)
	}
	return out
}
