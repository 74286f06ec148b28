package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/cgroups"
	"github.com/countbot/toolsvc/internal/netinit"
	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/countbot/toolsvc/internal/procgroup"
)

// Child is a command started by Start.
type Child struct {
	cmd   *exec.Cmd
	group *cgroups.Group // nil without control groups
	pidns bool           // the command's PID namespace ends with it
	mark  string         // the call's mark where the service is the subreaper without a Landlock domain
	// Where the service is the subreaper and each call has a Landlock
	// domain scoping signals, the call's processes are those its
	// launching thread may signal: thread runs a function there, and
	// since is when the command's first process started (none of the
	// call's started before it).
	thread    chan func()
	since     uint64
	release   chan struct{} // lets the launching thread end
	spareNext bool          // a spare is made for the next command once this one ended
	egress    net.Listener  // on EgressAddr in the command's network namespace; nil without Egress
	s         *Sandbox

	mu   sync.Mutex // orders kill and cleanup
	done bool       // cleaned up: nothing of the command is left to kill

	warmState // when started in a sandbox started ahead (warm_linux.go)
}

// Start starts cmd, built from Command with the same tmpDir and made with
// exec.CommandContext, inside the sandbox, and returns it for Wait. When
// the context is done, the command and everything it started are killed.
//
// The command is forked from a dedicated OS thread that first confines
// itself, so that the child is confined from its first instruction and
// nothing can run in between: it enters the command's control group (v1),
// drops every capability from its bounding, inheritable and ambient sets
// (the child then has none after execve, root or not), sets no_new_privs,
// restricts itself with Landlock and installs the seccomp filter. All of
// these bind the thread only, never the rest of the service, and the
// thread is never unlocked, so the Go runtime ends it with its goroutine
// instead of reusing it. The goroutine stays until the command ends: the
// child's parent-death signal fires when the thread that forked it exits,
// so the command is killed if the service dies, and not before.
//
// This avoids re-executing the service's binary as a launcher, whose
// start-up would cost more than the command. Where the sandbox makes the
// command's temporary folder itself, the thread is usually one confined
// ahead, while no call waited (see spare_linux.go).
func (s *Sandbox) Start(cmd *exec.Cmd, tmpDir string) (*Child, error) {
	return s.start(context.Background(), cmd, tmpDir, false)
}

// StartContext is Start for a command made with exec.CommandContext(ctx):
// knowing the context, it may run the command in a sandbox started ahead
// (warm_linux.go), which it then kills when ctx is done.
func (s *Sandbox) StartContext(ctx context.Context, cmd *exec.Cmd, tmpDir string) (*Child, error) {
	return s.start(ctx, cmd, tmpDir, true)
}

func (s *Sandbox) start(ctx context.Context, cmd *exec.Cmd, tmpDir string, warmOK bool) (*Child, error) {
	c := &Child{cmd: cmd, pidns: s.pidns || s.mode == Bwrap, release: make(chan struct{}), s: s}
	if s.spareFor(tmpDir) {
		c.spareNext = true
	}
	if !warmOK || !s.warmFits(cmd) {
		if s.mode == Bwrap {
			// Under bubblewrap a spare is for a command that can run in
			// the bubblewrap it started ahead, which is most of what it
			// saves; any other starts bubblewrap on a thread of its own
			// and leaves the spare to the next.
			return s.startOn(c, nil, cmd, tmpDir)
		}
		// Elsewhere the confined thread is most of what a spare saves:
		// the command takes it, and the shell started ahead goes.
		sp := s.takeSpare(tmpDir)
		if sp != nil && sp.warm != nil {
			sp.warm.end(s)
			sp.warm = nil
		}
		return s.startOn(c, sp, cmd, tmpDir)
	}
	sp := s.takeSpare(tmpDir)
	if sp != nil && sp.warm != nil && s.startInWarm(ctx, c, sp, cmd) == nil {
		return c, nil
	}
	// No spare, one whose warm start failed, or one whose sandbox is
	// gone: the spare's thread is used as it is.
	return s.startOn(c, sp, cmd, tmpDir)
}

// prepareAttr sets what every command's process gets: a session of its
// own, death with its launching thread, its PID namespace where the
// sandbox makes one, and the account commands run as.
func (s *Sandbox) prepareAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attr := cmd.SysProcAttr
	attr.Setsid = true
	attr.Pdeathsig = syscall.SIGKILL
	if s.pidns {
		attr.Cloneflags |= syscall.CLONE_NEWPID
	}
	if s.userns {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
	}
	if s.netinit != "" && s.mode != Bwrap {
		netinitAttr(attr)
	}
	if s.user != nil {
		attr.Credential = &syscall.Credential{Uid: s.user.Uid, Gid: s.user.Gid, Groups: []uint32{}}
	}
}

// startOn starts c's command, prepared, on the spare sp's thread, or on a
// thread confined now when sp is nil.
// Nothing here returns before the launch is handed to a thread but a
// failure to prepare: a failure after that ends the thread, and c.cleanup
// gives the group back.
func (s *Sandbox) startOn(c *Child, sp *spare, cmd *exec.Cmd, tmpDir string) (*Child, error) {
	s.prepareAttr(cmd)
	netinitSock, release, err := s.extraFiles(cmd)
	if err != nil {
		if sp != nil {
			sp.end()
		}
		return nil, err
	}
	defer release()
	attr := cmd.SysProcAttr
	switch {
	case s.subreaper && s.scoped:
		c.thread = make(chan func())
	case s.subreaper:
		c.mark = newMark()
		cmd.Env = append(cmd.Env, markVar+"="+c.mark)
	}
	if sp != nil {
		c.group = sp.group
		// The spare's thread is in the namespace its listener is in.
		c.egress, sp.egress = sp.egress, nil
	} else if s.cg != nil {
		g, err := s.cg.Get()
		if err != nil {
			return nil, err
		}
		c.group = g
	}
	if c.group != nil {
		c.group.Prepare(attr)
	}
	cmd.Cancel = func() error { c.kill(); return nil }
	errc := make(chan error, 1)
	launch := s.launch(c, errc)
	if sp != nil {
		sp.run <- launch
	} else {
		onDisposableThread(func() {
			ln, err := s.confineThread(c.group, tmpDir)
			if err != nil {
				errc <- err
				return
			}
			// Set before the launch reports, which Start waits for.
			c.egress = ln
			launch()
		})
	}
	if err := <-errc; err != nil {
		c.cleanup()
		return nil, err
	}
	if netinitSock != nil {
		// The command's end is the command's alone now: with it closed
		// here, the hand-over sees the end of the first program.
		cmd.ExtraFiles[len(cmd.ExtraFiles)-1].Close()
		if err := c.receiveEgress(netinitSock); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// extraFiles gives cmd the descriptors the sandbox passes to its first
// program: under bubblewrap the seccomp program (fd 3, named by
// bwrapArgs), and where netinit makes the command's network namespace
// its end of the hand-over (s.netinitFD()), whose other end, the
// service's, is returned. release closes the service's copies once the
// command has started.
func (s *Sandbox) extraFiles(cmd *exec.Cmd) (netinitSock *os.File, release func(), err error) {
	var files []*os.File
	release = func() {
		for _, f := range files {
			f.Close()
		}
	}
	if s.mode == Bwrap && s.seccomp != nil {
		r, err := s.seccompPipe()
		if err != nil {
			return nil, release, err
		}
		files = append(files, r)
		cmd.ExtraFiles = []*os.File{r}
	}
	if s.netinit != "" {
		if len(cmd.ExtraFiles) != s.netinitFD()-3 {
			// The descriptor's number is in the command line already.
			release()
			return nil, func() {}, errors.New("sandbox: a command with Egress takes no descriptors of its own (ExtraFiles)")
		}
		mine, theirs, err := netinit.Pair()
		if err != nil {
			release()
			return nil, func() {}, err
		}
		files = append(files, mine, theirs)
		netinitSock = mine
		cmd.ExtraFiles = append(cmd.ExtraFiles, theirs)
	}
	return netinitSock, release, nil
}

// launch returns what a confined thread runs to start c's command: it
// reports the start on errc, then holds the thread until the command has
// ended.
func (s *Sandbox) launch(c *Child, errc chan<- error) func() {
	cmd := c.cmd
	return func() {
		// Descriptors the service inherited from whatever started it
		// (a supervisor, a shell) are not close-on-exec: mark them so
		// that no command gets them. Go opens its own close-on-exec.
		if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil && !errors.Is(err, unix.ENOSYS) {
			errc <- fmt.Errorf("marking descriptors close-on-exec: %w", err)
			return
		}
		// A sweep must not reap a shell that exits before it is known as
		// a running command's.
		s.launching.RLock()
		err := cmd.Start()
		if err == nil {
			s.leaders.Store(cmd.Process.Pid, true)
		}
		s.launching.RUnlock()
		if err != nil {
			errc <- err
			return
		}
		if c.thread != nil {
			if st, ok := procgroup.ReadStat(cmd.Process.Pid); ok {
				c.since = st.StartTime
			}
		}
		errc <- nil
		for {
			select {
			case f := <-c.thread: // nil without a domain: never ready
				f()
			case <-c.release:
				return
			}
		}
	}
}

// sweepDomain kills, from the command's launching thread, every process
// in the call's Landlock domain but the command's shell (see sweepDomain
// in reaper_linux.go), and reports whether none is left.
func (c *Child) sweepDomain(limit time.Duration) bool {
	done := make(chan bool, 1)
	c.thread <- func() {
		done <- sweepDomain(c.cmd.Process.Pid, c.since, limit)
	}
	return <-done
}

// seccompPipe returns the read end of a pipe holding the seccomp program,
// for bubblewrap's --seccomp. The program is far smaller than a pipe's
// buffer: the write cannot block, and bubblewrap reads it before the
// command starts.
func (s *Sandbox) seccompPipe() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(s.seccomp.bytes())
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// onDisposableThread runs f in a new goroutine locked to an OS thread
// that the Go runtime ends when f returns, so that whatever f does to its
// thread dies with it. The main thread is never that thread: the runtime
// cannot end it and would keep it, confined, for good. A goroutine that
// finds itself on the main thread hands f to another goroutine while it
// holds the main thread, so that the other must start on a different one.
func onDisposableThread(f func()) {
	go func() {
		runtime.LockOSThread() // never unlocked unless on the main thread
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			close(locked)
			f()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// confineThread applies, to the calling thread only, everything a command
// must inherit. The order matters: entering a control group needs write
// access to it, which Landlock then takes away; the network namespace
// needs CAP_SYS_ADMIN and CAP_NET_ADMIN, which the thread then drops from
// what it hands on; no_new_privs must precede Landlock and seccomp; the
// capabilities forking needs (a new PID namespace, setuid for
// TOOLSVC_EXEC_USER) stay in the thread's effective set, since the child
// loses them at execve with an empty bounding set.
//
// With Egress, where the thread makes the namespace (not netinit's way),
// it enters a network namespace of its own and returns the listener it
// made there (see egress_linux.go); on error the listener is closed.
func (s *Sandbox) confineThread(g *cgroups.Group, tmpDir string) (egress net.Listener, err error) {
	defer func() {
		if err != nil && egress != nil {
			egress.Close()
			egress = nil
		}
	}()
	if g != nil {
		if err := g.EnterThread(); err != nil {
			return nil, err
		}
	}
	if s.mountns {
		if err := s.threadMounts(tmpDir); err != nil {
			return nil, err
		}
	}
	if s.egress && s.netinit == "" {
		if egress, err = enterEgressNamespace(); err != nil {
			return nil, err
		}
	}
	// bubblewrap run by root needs its capabilities to build the
	// namespaces: it gets them through the inheritable set and drops
	// them all for the command (--cap-drop ALL).
	if err := dropInheritableCaps(s.mode == Bwrap, s.lastCap); err != nil {
		return egress, err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return egress, fmt.Errorf("setting no_new_privs: %w", err)
	}
	if s.mode != Landlock && (s.scoped || s.egressTCP) {
		if err := s.threadDomain(); err != nil {
			return egress, err
		}
	}
	if s.mode == Landlock {
		// The rules are built here, after the mounts above, so that they
		// name the command's own /proc and /tmp.
		if err := s.restrictThread(tmpDir); err != nil {
			return egress, err
		}
	}
	if s.seccomp != nil && s.mode != Bwrap {
		// Under bubblewrap the filter goes to the command through
		// --seccomp: bubblewrap itself needs mount and friends.
		if err := s.seccomp.load(); err != nil {
			return egress, err
		}
	}
	return egress, nil
}

// threadMounts gives the calling thread the command's own mounts: a
// private /proc and /run (privateMounts), its fresh temporary folder, and
// under Landlock the private paths covered.
func (s *Sandbox) threadMounts(tmpDir string) error {
	if err := privateMounts(append([]string{s.ws, tmpDir}, s.writable...)); err != nil {
		return err
	}
	if tmpDir == s.tmpMount {
		if err := s.freshTmpfs(tmpDir); err != nil {
			return err
		}
	}
	if s.mode == Landlock {
		return coverPaths(s.hidden)
	}
	return nil
}

// restrictThread enforces the command's Landlock rules on the calling
// thread.
func (s *Sandbox) restrictThread(tmpDir string) error {
	rs, err := s.landlockRuleset(tmpDir)
	if err != nil {
		return err
	}
	err = rs.restrictSelf()
	rs.close()
	return err
}

// noGroup is a group no process is in: hidepid exempts the members of
// the group named in its gid option, and the default is root's group.
const noGroup = "2147483646"

// privateMounts gives the calling thread a mount namespace of its own,
// which the command inherits: a /proc that shows only the processes the
// command could inspect anyway (hidepid=invisible: not the service, not
// other commands, not other users' daemons, whose command lines may hold
// secrets), and empty folders over /run, /var/run and /var/tmp, where
// sockets that lead out of any sandbox live (docker, dbus, databases),
// unless the workspace or another folder the command needs is there.
// Unsharing the mount namespace also
// unshares the thread's file-system information, which is why the thread
// is never reused. It needs CAP_SYS_ADMIN, so it is used only where the
// service has it.
func privateMounts(keep []string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unsharing the mount namespace: %w", err)
	}
	// Nothing mounted here may reach the host's mount table.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible,gid="+noGroup); err != nil {
		return fmt.Errorf("mounting a private /proc: %w", err)
	}
	for _, d := range []string{"/run", "/var/run", "/var/tmp"} {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() && !holdsAny(d, keep) {
			if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
				return fmt.Errorf("hiding %s: %w", d, err)
			}
		}
	}
	return nil
}

// freshTmpfs mounts an empty tmpfs on dir, in the calling thread's own
// mount namespace, owned by the account commands run as and private to it,
// with an empty folder TempHome in it. The folder dir itself is made
// again if something (a cleaner of old files in /tmp) removed it.
func (s *Sandbox) freshTmpfs(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("making the temporary folder's mount point: %w", err)
	}
	// Made again by someone else in a shared /tmp, the name could be a
	// link leading the mount elsewhere: only the service's own folder.
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("the temporary folder's mount point %s is not a folder of the service's own", dir)
	}
	uid, gid := 0, 0
	if s.user != nil {
		uid, gid = int(s.user.Uid), int(s.user.Gid)
	}
	opts := fmt.Sprintf("mode=0700,uid=%d,gid=%d", uid, gid)
	if s.limits.MaxMemory > 0 {
		opts += ",size=" + strconv.FormatInt(s.limits.MaxMemory, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting the temporary folder: %w", err)
	}
	home := filepath.Join(dir, TempHome)
	if err := unix.Mkdir(home, 0o700); err != nil {
		return fmt.Errorf("making the command's HOME: %w", err)
	}
	if err := unix.Chown(home, uid, gid); err != nil {
		return fmt.Errorf("making the command's HOME: %w", err)
	}
	return nil
}

// coverPaths covers each path in the calling thread's own mount namespace: a
// folder with an empty read-only tmpfs, a file with /dev/null, read-only.
// The command, without CAP_SYS_ADMIN, cannot take the mounts away.
func coverPaths(paths []string) error {
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue // gone: nothing to hide
		}
		if fi.IsDir() {
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0,size=4k")
		} else if err = unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err == nil {
			err = unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}
		if err != nil {
			return fmt.Errorf("hiding %s: %w", p, err)
		}
	}
	return nil
}

func holdsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if pathx.Contains(dir, p) {
			return true
		}
	}
	return false
}

// dropInheritableCaps empties the calling thread's bounding (capabilities
// 0 to last) and ambient capability sets, and its inheritable set unless forExec. For root,
// execve grants exactly the inheritable set plus the bounding set, so the
// command starts with no capability at all, and can gain none later. With
// forExec the inheritable set is first filled with the thread's permitted
// capabilities, so that the program started (bubblewrap) still gets them
// while the bounding set it hands on is empty. A thread without
// CAP_SETPCAP (the service is not root) cannot shrink its bounding set,
// but has nothing to hand on either: no_new_privs keeps set-user-ID and
// file capabilities from adding any.
func dropInheritableCaps(forExec bool, last int) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	setpcap := data[0].Effective&(1<<unix.CAP_SETPCAP) != 0
	if forExec {
		if !setpcap {
			return nil // not root: bubblewrap works through a user namespace
		}
		// The inheritable set may grow only within the bounding set, so
		// it is filled before the bounding set is emptied.
		data[0].Inheritable, data[1].Inheritable = data[0].Permitted, data[1].Permitted
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("setting inheritable capabilities: %w", err)
		}
	}
	if setpcap {
		for c := 0; c <= last; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
			}
		}
	}
	if forExec {
		return nil
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing inheritable capabilities: %w", err)
	}
	return nil
}

// lastCap is the highest capability number the kernel knows. The
// sandbox reads it once: every command's launching thread needs it.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return unix.CAP_LAST_CAP
	}
	n := 0
	for _, ch := range b {
		if ch >= '0' && ch <= '9' {
			n = n*10 + int(ch-'0')
		}
	}
	if n == 0 {
		return unix.CAP_LAST_CAP
	}
	return n
}

// Pid returns the command's process ID (its process group and session ID
// too).
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Kill kills the command and everything it started, at once.
func (c *Child) Kill() { c.kill() }

func (c *Child) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		// Reaped, and its group may be another command's by now.
		return
	}
	_ = procgroup.Kill(c.cmd.Process.Pid)
	if c.thread != nil {
		c.sweepDomain(0)
	}
	if c.mark != "" {
		// Killing, not waiting: Wait does that.
		c.s.sweep(c.mark, c.cmd.Process.Pid, 0)
	}
	if c.group != nil {
		// Killing the group, not waiting: Wait does that.
		c.group.Kill(0)
	}
}

// Wait waits for the command's shell to end, then ends everything it left
// (background jobs, detached daemons) and reaps it. contained reports
// whether it is known that no process of the command is left: true with a
// PID namespace (the kernel ends every process in it with its first) or a
// control group seen empty; false where only the process group could be
// killed.
func (c *Child) Wait() (err error, contained bool) {
	if c.group != nil || (c.pidns && c.s.mode != Bwrap) {
		// The group's kill below waits until no process is left in it;
		// the command's own PID namespace ended with its first process
		// (bubblewrap's ends with its inner process, after bubblewrap).
		err = procgroup.WaitLeader(c.cmd)
	} else {
		err = procgroup.Wait(c.cmd)
	}
	c.s.leaders.Delete(c.cmd.Process.Pid)
	switch {
	case c.group != nil:
		// bubblewrap may end before the first process of its PID
		// namespace has: the namespace is going away by itself, and a
		// group left to empty needs no kill (after which a v2 group could
		// not be reused), nor a second look at its lists.
		if c.s.mode == Bwrap && c.group.AwaitEmpty(5*time.Millisecond) {
			contained = true
		} else {
			contained = c.group.Kill(2 * time.Second)
		}
		if c.pidns {
			contained = true
		}
	case c.pidns:
		contained = true
	case c.thread != nil:
		contained = c.sweepDomain(2 * time.Second)
	case c.mark != "":
		// A process that replaced its whole environment carries no mark:
		// that none is found proves nothing.
		c.s.sweep(c.mark, c.cmd.Process.Pid, 2*time.Second)
	}
	if c.call != nil {
		c.finishWarm()
	}
	c.cleanup()
	return err, contained
}

// cleanup lets the launching thread end and hands the control group back
// for another command (or to be removed, when its kill failed).
func (c *Child) cleanup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	close(c.release)
	if c.egress != nil {
		c.egress.Close()
	}
	if c.group != nil {
		c.group.Release()
	}
	if c.spareNext {
		go c.s.makeSpare()
	}
}
