package cgroups

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are what every group is given. Zero means no limit of that kind.
type Limits struct {
	MaxProcs  int   // processes and threads at once
	MaxMemory int64 // bytes of memory (page cache included, as the kernel counts it)
}

// Manager makes groups below the service's own control group.
type Manager struct {
	limits Limits
	prefix string // folder name of this process's groups, e.g. toolsvc-1234-1a2b3c4d-ns4026531836
	pidns  string // the number of this process's PID namespace, or ""

	v2      string            // parent folder in the unified hierarchy; "" when unusable
	v2procs bool              // pids controller enabled below v2
	v2mem   bool              // memory controller enabled below v2
	v1      map[string]string // controller -> parent folder in its legacy hierarchy
	dynmods bool              // a cgroup mount has favordynmods: moving a thread is cheap

	seq atomic.Uint64

	mu   sync.Mutex
	idle []*Group // emptied groups waiting for another command
}

// maxIdle bounds the groups kept for reuse; more are removed.
const maxIdle = 16

// Group is one command's control group.
type Group struct {
	m    *Manager
	v2   string            // folder, "" when not in v2
	v2fd int               // open folder, for CLONE_INTO_CGROUP; -1 when none
	v1   map[string]string // controller -> folder
	// spoiled is set when the last kill did not see the group empty;
	// killed once cgroup.kill was written. Either way it is not reused.
	spoiled, killed atomic.Bool
}

// errUnavailable is returned by New when no hierarchy can be used.
var errUnavailable = errors.New("no writable control group hierarchy")

// New finds the service's own control groups and makes a folder for its
// commands' groups below each that it may write. It fails when there is
// none: the caller then falls back to resource limits per process. Groups
// left by an earlier process of the service that was killed are emptied
// and removed first, so its commands do not run on.
func New(limits Limits) (*Manager, error) {
	// The process ID names the folder, so that a later process can tell
	// whether its owner still runs; the random part keeps apart several
	// managers in one process (tests start many services); the PID
	// namespace says where that process ID means something.
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	m := &Manager{limits: limits, pidns: pidNamespace(), v1: map[string]string{}}
	m.prefix = fmt.Sprintf("toolsvc-%d-%x", os.Getpid(), rnd)
	if m.pidns != "" {
		m.prefix += "-ns" + m.pidns
	}
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	own, err := readOwnGroups()
	if err != nil {
		return nil, err
	}
	m.dynmods = mounts.dynmods
	var reasons []string
	if mnt := mounts.v2; mnt != "" {
		if reason := m.useV2(filepath.Join(mnt, own["0::"])); reason != "" {
			reasons = append(reasons, reason)
		}
	}
	reasons = append(reasons, m.useV1(mounts.v1, own)...)
	if m.v2 == "" && len(m.v1) == 0 {
		if len(reasons) == 0 {
			reasons = append(reasons, "no cgroup file system is mounted")
		}
		return nil, fmt.Errorf("%w (%s)", errUnavailable, strings.Join(reasons, "; "))
	}
	return m, nil
}

// useV2 makes the manager's folder below dir, the service's own v2 group,
// and hands it the controllers the limits need where the level above
// allows. It returns why it could not, or "".
func (m *Manager) useV2(dir string) string {
	m.cleanStale(dir, true)
	parent := filepath.Join(dir, m.prefix)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Sprintf("cgroup v2 at %s: %v", dir, err)
	}
	m.v2 = parent
	// Controllers can be handed down only where the level above
	// already hands them to this folder.
	avail, _ := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	for _, c := range strings.Fields(string(avail)) {
		if (c == "pids" && m.limits.MaxProcs > 0) || (c == "memory" && m.limits.MaxMemory > 0) {
			if os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+c), 0) == nil {
				m.v2procs = m.v2procs || c == "pids"
				m.v2mem = m.v2mem || c == "memory"
			}
		}
	}
	if err := m.probeCloneInto(); err != nil {
		_ = unix.Rmdir(parent)
		m.v2, m.v2procs, m.v2mem = "", false, false
		return fmt.Sprintf("cgroup v2 at %s: a process cannot be started inside a group (clone3 with CLONE_INTO_CGROUP, Linux 5.7): %v", dir, err)
	}
	return ""
}

// probeCloneInto starts /bin/true straight into a new v2 group, as every
// command is started, then removes the group (the legacy folders that
// commands' groups may also need are not made yet). The
// unified hierarchy is used only where that works: a thread cannot be
// moved into a v2 group on its own, so there is no other race-free way
// to have the command born inside it.
func (m *Manager) probeCloneInto() error {
	bin := "/bin/true"
	if _, err := os.Stat(bin); err != nil {
		return nil // nothing to try with; a failure shows at the sandbox's trial run
	}
	g, err := m.fresh()
	if err != nil {
		return err
	}
	defer g.Remove()
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	g.Prepare(cmd.SysProcAttr)
	return cmd.Run()
}

// useV1 makes the manager's folders in the legacy hierarchies (mounts,
// by controller) for the limits v2 does not already enforce, below the
// service's own groups (own, by controller). It returns why it could not
// for each it could not.
func (m *Manager) useV1(mounts, own map[string]string) []string {
	var reasons []string
	for _, c := range []string{"pids", "memory"} {
		if (c == "pids" && (m.v2procs || m.limits.MaxProcs <= 0)) || (c == "memory" && (m.v2mem || m.limits.MaxMemory <= 0)) {
			continue
		}
		mnt, ok := mounts[c]
		if !ok {
			continue
		}
		dir := filepath.Join(mnt, own[c])
		m.cleanStale(dir, false)
		parent := filepath.Join(dir, m.prefix)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			reasons = append(reasons, fmt.Sprintf("cgroup v1 %s at %s: %v", c, dir, err))
			continue
		}
		if c == "memory" {
			// Limits apply to the whole subtree, as in v2.
			_ = os.WriteFile(filepath.Join(parent, "memory.use_hierarchy"), []byte("1"), 0)
		}
		m.v1[c] = parent
	}
	return reasons
}

// Describe says what the groups enforce, for the start-up log.
func (m *Manager) Describe() string {
	var parts []string
	if m.v2 != "" {
		parts = append(parts, "cgroup v2 "+m.v2+" (kill on end)")
	}
	for _, c := range []string{"pids", "memory"} {
		if d, ok := m.v1[c]; ok {
			parts = append(parts, "cgroup v1 "+c+" "+d)
		}
	}
	if len(m.v1) > 0 && !m.dynmods {
		// Moving a thread into a legacy group takes the kernel's
		// cgroup_threadgroup_rwsem for writing, which can wait for an RCU
		// grace period: seen here taking 9-16 ms on some calls, never
		// with favordynmods.
		parts = append(parts, "entering the v1 groups can cost a command 10 ms or more unless a cgroup file system is mounted with favordynmods (Linux 6.0)")
	}
	return strings.Join(parts, ", ")
}

// LimitsProcs reports whether the process limit is enforced by the groups.
func (m *Manager) LimitsProcs() bool {
	_, v1 := m.v1["pids"]
	return m.limits.MaxProcs > 0 && (m.v2procs || v1)
}

// LimitsMemory reports whether the memory limit is enforced by the groups.
func (m *Manager) LimitsMemory() bool {
	_, v1 := m.v1["memory"]
	return m.limits.MaxMemory > 0 && (m.v2mem || v1)
}

// Kills reports whether a group can be killed whole (always: v2 has
// cgroup.kill, v1 a loop over its members).
func (m *Manager) Kills() bool { return m.v2 != "" || len(m.v1) > 0 }

// Get hands out the group of one command: an emptied group of an
// earlier command where one is ready, else a new one. Making a group and
// removing it costs more than the command `true` (the kernel sets up and
// tears down each controller's state, and a legacy group cannot be
// removed until the launching thread has ended), so groups are reused. A
// group is reused only when no process or thread is left in it, and its
// limits are written again first, so each command starts with the same
// ceilings, whatever the one before did.
func (m *Manager) Get() (*Group, error) {
	for {
		g := m.takeIdle()
		if g == nil {
			break
		}
		if err := g.setLimits(); err == nil {
			return g, nil
		}
		go g.discard()
	}
	return m.fresh()
}

// takeIdle returns an idle group that is empty, or nil. A group that still
// holds its last launching thread (it ends moments after its command) is
// left for later; one that holds anything else is killed and removed.
func (m *Manager) takeIdle() *Group {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < len(m.idle); {
		g := m.idle[i]
		st := g.state()
		if st == stateBusy {
			i++
			continue
		}
		m.idle = slices.Delete(m.idle, i, i+1)
		if st == stateForeign {
			go g.discard()
			continue
		}
		return g
	}
	return nil
}

// Release gives the group back once its command has ended and Kill has
// been called: a group seen empty without cgroup.kill is kept for another
// command; one that needed cgroup.kill, or whose kill failed, is killed
// again and removed in the background.
func (g *Group) Release() {
	m := g.m
	if !g.spoiled.Load() && !g.killed.Load() {
		m.mu.Lock()
		if len(m.idle) < maxIdle {
			m.idle = append(m.idle, g)
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
	}
	go g.discard()
}

// discard kills what is left in the group and removes it.
func (g *Group) discard() {
	g.Kill(2 * time.Second)
	g.Remove()
}

// fresh makes a new group with the limits.
func (m *Manager) fresh() (*Group, error) {
	name := fmt.Sprintf("call-%d", m.seq.Add(1))
	g := &Group{m: m, v2fd: -1, v1: map[string]string{}}
	if m.v2 != "" {
		dir := filepath.Join(m.v2, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("making control group %s: %w", dir, err)
		}
		g.v2 = dir
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			g.Remove()
			return nil, fmt.Errorf("opening control group %s: %w", dir, err)
		}
		g.v2fd = fd
	}
	for c, parent := range m.v1 {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.Remove()
			return nil, fmt.Errorf("making control group %s: %w", dir, err)
		}
		g.v1[c] = dir
	}
	if err := g.setLimits(); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

// setLimits writes the manager's limits into the group's folders.
func (g *Group) setLimits() error {
	m := g.m
	if g.v2 != "" && m.v2procs {
		if err := writeLimit(g.v2, "pids.max", strconv.Itoa(m.limits.MaxProcs)); err != nil {
			return err
		}
	}
	if g.v2 != "" && m.v2mem {
		if err := writeLimit(g.v2, "memory.max", strconv.FormatInt(m.limits.MaxMemory, 10)); err != nil {
			return err
		}
		_ = os.WriteFile(filepath.Join(g.v2, "memory.swap.max"), []byte("0"), 0)
	}
	if dir, ok := g.v1["pids"]; ok {
		// One more than asked: the launching thread sits in the group
		// until the command has started. Kill set it to 0.
		if err := writeLimit(dir, "pids.max", strconv.Itoa(m.limits.MaxProcs+1)); err != nil {
			return err
		}
	}
	if dir, ok := g.v1["memory"]; ok {
		limit := strconv.FormatInt(m.limits.MaxMemory, 10)
		if err := writeLimit(dir, "memory.limit_in_bytes", limit); err != nil {
			return err
		}
		// Without this the swap the host has would lift the limit. (A
		// value left below the limit by a command with write access to
		// the folder fails the write above instead: the group is dropped.)
		_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(limit), 0)
	}
	return nil
}

// The states of an idle group.
const (
	stateEmpty   = iota // no process or thread: ready
	stateBusy           // only a thread of the service is left (the launching thread, about to end)
	stateForeign        // a process is in it, or it cannot be read
)

// state looks into the group's folders: whether the v2 group or a group
// below it holds a process (cgroup.events; the service's threads are
// never in a v2 group: the child is cloned into it), and the tasks of each
// v1 folder, which list the launching thread too. A group holding only
// the service's threads and processes that are ending is busy: it will
// be empty in a moment.
func (g *Group) state() int {
	st := stateEmpty
	if g.v2 != "" {
		b, err := readSmall(filepath.Join(g.v2, "cgroup.events"))
		switch {
		case err != nil:
			return stateForeign
		case bytes.Contains(b, []byte("populated 0")):
		case len(members(g.v2)) == 0:
			st = stateBusy // only processes that are ending
		default:
			return stateForeign
		}
	}
	self := os.Getpid()
	for _, d := range g.v1 {
		b, err := readSmall(filepath.Join(d, "tasks"))
		if err != nil {
			return stateForeign
		}
		for _, f := range strings.Fields(string(b)) {
			tid, err := strconv.Atoi(f)
			if err != nil || !(ownThread(self, tid) || ending(tid)) {
				return stateForeign
			}
			st = stateBusy
		}
	}
	return st
}

// ownThread reports whether tid is a thread of process pid.
func ownThread(pid, tid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid))
	return err == nil
}

func writeLimit(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("setting %s of control group %s: %w", file, dir, err)
	}
	return nil
}

// Prepare sets attr so that the child is created inside the group's v2
// folder.
func (g *Group) Prepare(attr *syscall.SysProcAttr) {
	if g.v2fd >= 0 {
		attr.UseCgroupFD = true
		attr.CgroupFD = g.v2fd
	}
}

// EnterThread moves the calling OS thread into the group's v1 folders, so
// that a process it forks is born there. The caller must have locked the
// goroutine to its thread and must let the thread end afterwards (a locked
// goroutine that returns without unlocking does), since the thread cannot
// be moved back once it has been confined.
func (g *Group) EnterThread() error {
	tid := strconv.Itoa(unix.Gettid())
	for c, dir := range g.v1 {
		if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte(tid), 0); err != nil {
			return fmt.Errorf("entering control group %s (%s): %w", dir, c, err)
		}
	}
	return nil
}

// Kill kills every process in the group and waits, at most timeout, until none
// is left. It reports whether the group was seen empty; a group that was
// not is removed, not reused, when it is released.
func (g *Group) Kill(timeout time.Duration) bool {
	if g.empty() {
		// Nothing is left (the usual case, and always once a PID
		// namespace has ended): no write, so the group stays fit for reuse.
		g.spoiled.Store(false)
		return true
	}
	if g.v2 != "" {
		// A group killed through cgroup.kill is not reused: Linux 6.18
		// kills at birth every child cloned into such a group later
		// (clone3 with CLONE_INTO_CGROUP; /bin/true dies of SIGKILL).
		g.killed.Store(true)
		if err := os.WriteFile(filepath.Join(g.v2, "cgroup.kill"), []byte("1"), 0); err != nil {
			// Kernels before 5.14 lack cgroup.kill: kill the members one by one.
			killMembers(g.v2)
		}
	}
	if d, ok := g.v1["pids"]; ok {
		// No new process from here on, so the loop below ends.
		_ = os.WriteFile(filepath.Join(d, "pids.max"), []byte("0"), 0)
	}
	deadline := time.Now().Add(timeout)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		if g.empty() {
			g.spoiled.Store(false) // the last kill decides
			return true
		}
		if time.Now().After(deadline) {
			g.spoiled.Store(true)
			return false
		}
		for _, d := range g.dirs() {
			killMembers(d)
		}
		time.Sleep(wait)
	}
}

// AwaitEmpty waits, at most timeout, until no process is left in the
// group, looking often: it is for processes known to be ending by
// themselves, whose end a caller waits for. It reports whether the group
// was seen empty; a group seen empty is fit for reuse, as after a Kill
// that finds it so, and needs no Kill.
func (g *Group) AwaitEmpty(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !g.empty() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	g.spoiled.Store(false)
	return true
}

// empty reports whether no process is left in the group's folders. The
// launching thread of v1 groups is not counted: it belongs to the service.
func (g *Group) empty() bool {
	for _, d := range g.dirs() {
		if len(members(d)) > 0 {
			return false
		}
	}
	return true
}

func (g *Group) dirs() []string {
	var out []string
	if g.v2 != "" {
		out = append(out, g.v2)
	}
	for _, d := range g.v1 {
		out = append(out, d)
	}
	return out
}

// Remove deletes the group's folders. The group must be empty; a folder
// that is still busy (a process the kernel has not finished tearing down,
// or the launching thread not yet ended) is retried for a short while.
func (g *Group) Remove() {
	if g.v2fd >= 0 {
		_ = unix.Close(g.v2fd)
		g.v2fd = -1
	}
	for _, d := range g.dirs() {
		for i := 0; i < 50; i++ {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			time.Sleep(time.Duration(i+1) * time.Millisecond)
		}
	}
}

// Close removes the idle groups and this process's folders. Groups still
// in use are left.
func (m *Manager) Close() {
	m.mu.Lock()
	idle := m.idle
	m.idle = nil
	m.mu.Unlock()
	for _, g := range idle {
		g.Remove()
	}
	for _, d := range append([]string{m.v2}, values(m.v1)...) {
		if d != "" {
			_ = unix.Rmdir(d)
		}
	}
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// cleanStale kills what is left in the groups of service processes that
// no longer run (killed with SIGKILL, or a crash), and removes them. The
// groups of a service in another PID namespace (one started with a PID
// namespace of its own that shares this control group, as PID 1 of a
// container without a control group namespace would) are left alone:
// its process ID says nothing here, where another process may have it, or
// none.
func (m *Manager) cleanStale(dir string, v2 bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "toolsvc-")
		pid, rest, _ := strings.Cut(rest, "-")
		if !e.IsDir() || !ok {
			continue
		}
		if _, ns, named := strings.Cut(rest, "-ns"); named && ns != m.pidns {
			continue // a service's of another PID namespace
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() || running(n) {
			continue // not ours, or its service still runs
		}
		parent := filepath.Join(dir, e.Name())
		calls, _ := os.ReadDir(parent)
		for _, c := range calls {
			if !c.IsDir() {
				continue
			}
			d := filepath.Join(parent, c.Name())
			if v2 {
				_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
			} else {
				_ = os.WriteFile(filepath.Join(d, "pids.max"), []byte("0"), 0)
			}
			for i := 0; i < 100 && len(members(d)) > 0; i++ {
				killMembers(d)
				time.Sleep(time.Millisecond)
			}
			_ = unix.Rmdir(d)
		}
		_ = unix.Rmdir(parent)
	}
}

// pidNamespace returns the number of the calling process's PID namespace
// (the inode of /proc/self/ns/pid), or "" where it cannot be read.
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	n, ok := strings.CutPrefix(link, "pid:[")
	n, ok2 := strings.CutSuffix(n, "]")
	if !ok || !ok2 {
		return ""
	}
	return n
}

// running reports whether process pid exists. A process of another user
// exists too: signal 0 is then refused with EPERM, not ESRCH. Taking that
// refusal for "gone" would let a service run by one user kill the
// commands of another user's live service sharing the parent group,
// wherever both run commands as the same account.
func running(pid int) bool {
	return unix.Kill(pid, 0) != unix.ESRCH
}

// members lists the processes in one folder (not below it).
func members(dir string) []int {
	b, err := readSmall(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return nil // the common case: no system call for the process ID
	}
	var out []int
	self := os.Getpid()
	for _, f := range fields {
		if n, err := strconv.Atoi(f); err == nil && n != self && !ending(n) {
			out = append(out, n)
		}
	}
	return out
}

// ending reports whether process (or thread) pid is past the point of no
// return: exiting (PF_EXITING), a zombie, or gone. It runs no code of its
// own again; it stays listed in its control group while the kernel tears
// down what it held, such as the mount namespace of a bubblewrap
// sandbox, which takes milliseconds. A caller that waits for a command's
// processes to end need not wait for that.
func ending(pid int) bool {
	b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) // gone; anything else: unknown
	}
	// The fields after the name (which may hold spaces and parentheses):
	// state, ppid, pgrp, session, tty_nr, tpgid, flags.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// readSmall reads a small kernel file (a control group's list, a
// process's stat) with plain system calls. os.ReadFile would register the
// file with Go's poller, which takes kernfs files, and set and clear
// non-blocking mode: nine system calls where three do, several times a
// command while its group is watched.
func readSmall(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h).
const pfExiting = 0x4

func killMembers(dir string) {
	for _, pid := range members(dir) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// mountTable holds where the cgroup file systems are mounted: the unified
// hierarchy, and the legacy one of each controller used here.
type mountTable struct {
	v2      string
	v1      map[string]string
	dynmods bool // a cgroup file system is mounted with favordynmods
}

// readMounts finds the cgroup file systems in /proc/self/mountinfo.
func readMounts() (mountTable, error) {
	out := mountTable{v1: map[string]string{}}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || a[3] != "/" {
			continue // a bind mount of a subtree: paths would not match
		}
		if (b[0] == "cgroup2" || b[0] == "cgroup") && slices.Contains(strings.Split(b[2], ","), "favordynmods") {
			out.dynmods = true
		}
		switch b[0] {
		case "cgroup2":
			if out.v2 == "" {
				out.v2 = a[4]
			}
		case "cgroup":
			for _, o := range strings.Split(b[2], ",") {
				if o == "pids" || o == "memory" {
					out.v1[o] = a[4]
				}
			}
		}
	}
	return out, sc.Err()
}

// readOwnGroups returns the service's path in each hierarchy: "0::" for
// v2, the controller name for v1.
func readOwnGroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out["0::"] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}
