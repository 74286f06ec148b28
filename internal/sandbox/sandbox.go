// Package sandbox confines the shell that exec runs: the child sees the
// system read-only, the workspace read-write and a private temporary
// folder, never the service's data folder or other private paths, no
// network unless configured, no privilege, and a ceiling on its processes
// and memory; and nothing it starts outlives it.
//
// Two file-system mechanisms are supported. Landlock (an unprivileged
// Linux security module) must be in force before the shell starts: the
// child is started from an OS thread that restricted itself, and inherits
// the restriction. Bubblewrap (Debian's bubblewrap) builds a private mount,
// PID and network namespace around the shell. The rest applies in every
// mode, None included: the child is started from a dedicated thread that
// first drops every capability, sets no_new_privs and installs a seccomp
// filter, enters the command's control group, and stays until the command
// ends so that the command dies with the service (see launch_linux.go).
//
// No signal a command sends reaches a process its call did not start, and
// no process it starts outlives the call, wherever the kernel offers a
// way: a PID namespace of the command's own (bubblewrap; root; or, for a
// service that is not root, one inside a user namespace), or a Landlock
// domain of the call's own that scopes signals (Linux 6.12), by which
// the service also finds the call's processes however they detached.
// Where neither exists, Auto refuses to run commands (see SignalsContained).
//
// With a network allowlist (Options.Egress) each command gets a network
// namespace of its own holding only loopback, and reaches the network
// only through a listener the service serves there, on EgressAddr (see
// egress_linux.go and Child.Egress).
//
// A key given a folder of its own inside the workspace runs its commands
// in a sandbox of that folder's (see For): the folder is its workspace,
// and the rest of the workspace is one of its private paths.
//
// On other systems (see sandbox_other.go) only None works: commands run
// with plain os/exec, without any of the above, and Auto, Landlock and
// Bwrap are refused.
package sandbox

import "errors"

// Mode names a sandbox mechanism.
type Mode string

// The modes TOOLSVC_EXEC_SANDBOX accepts.
const (
	Auto     Mode = "auto"
	Landlock Mode = "landlock"
	Bwrap    Mode = "bwrap"
	None     Mode = "none"
)

// ErrNoSandbox is returned by New in Auto mode when no mechanism works
// here: commands are not run unconfined unless None was chosen explicitly.
var ErrNoSandbox = errors.New("no working sandbox")

// ErrFolderUnconfined is returned by For where commands run without a
// file-system sandbox (mode None): nothing would keep a command in a
// key's own folder away from its neighbours, so it is not run at all.
var ErrFolderUnconfined = errors.New("a key's own folder needs a sandbox that confines files (TOOLSVC_EXEC_SANDBOX=landlock, bwrap or auto), " +
	"and commands here run without one (none): they could read and write every other key's folder")

// ErrEgressUnavailable is returned by New, wrapped with the reason, when
// Options.Egress is asked for and commands cannot be given a network
// namespace of their own here: the caller refuses the setting at
// start-up rather than run commands with more network than it allows.
var ErrEgressUnavailable = errors.New("a network allowlist is not available")

// EgressAddr is where a command started with Options.Egress finds the
// service's forward proxy: the same address for every command, each in a
// network namespace of its own, so that HTTP_PROXY and friends can be set
// before the command starts.
const EgressAddr = "127.0.0.1:3128"

// Options configure a Sandbox.
type Options struct {
	Mode    Mode // "" means Auto
	Network bool // let the child use the network
	// Egress gives each command a network namespace of its own holding
	// only loopback, whose one way out is a listener on EgressAddr that
	// the service serves (see Child.Egress): no other interface, route or
	// resolver, and none of the host's abstract Unix sockets. It excludes
	// Network. Where no such namespace can be made New fails with
	// ErrEgressUnavailable.
	Egress    bool
	Workspace string // absolute, symbolic links resolved; read-write
	// Private lists folders or files the child must neither read nor
	// write (the data folder, TOOLSVC_EXEC_PRIVATE_PATHS). Paths that do
	// not exist are ignored.
	Private []string
	// Writable lists extra folders the child may read and write besides
	// the workspace and its temporary folder (its HOME). They must exist.
	Writable []string
	// Bwrap is the bubblewrap binary; default "bwrap" from PATH.
	Bwrap string
	// MaxProcs and MaxMemory bound one command and everything it starts:
	// processes and threads at once, and bytes of memory. Zero: no limit.
	MaxProcs  int
	MaxMemory int64
	// User, when set, is who commands run as (the service must be root).
	User *User

	// noLandlock makes Landlock unavailable, as on a kernel without it
	// (tests). Landlock is Linux's: other systems never read it.
	//lint:ignore U1000 used by sandbox_linux.go
	noLandlock bool
	// noScope makes Landlock's signal scoping unavailable, as on a kernel
	// older than Linux 6.12 (tests).
	//lint:ignore U1000 used by sandbox_linux.go
	noScope bool
	// noUserns makes user namespaces unavailable, as where the kernel or
	// a container's seccomp profile refuses them (tests).
	//lint:ignore U1000 used by sandbox_linux.go
	noUserns bool
}

// TempHome is the name of the empty folder the sandbox makes in a fresh
// temporary folder (see FreshTemp), for the command's HOME.
const TempHome = "home"

// User is an account commands run as.
type User struct {
	Name     string
	Uid, Gid uint32
}
