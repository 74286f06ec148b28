package cgroups

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	prefix string // folder name of this process's groups, e.g. toolsvc-1234

	v2      string            // parent folder in the unified hierarchy; "" when unusable
	v2procs bool              // pids controller enabled below v2
	v2mem   bool              // memory controller enabled below v2
	v1      map[string]string // controller -> parent folder in its legacy hierarchy

	seq atomic.Uint64
}

// Group is one command's control group.
type Group struct {
	m    *Manager
	v2   string            // folder, "" when not in v2
	v2fd int               // open folder, for CLONE_INTO_CGROUP; -1 when none
	v1   map[string]string // controller -> folder
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
	// managers in one process (tests start many services).
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	m := &Manager{limits: limits, prefix: fmt.Sprintf("toolsvc-%d-%x", os.Getpid(), rnd), v1: map[string]string{}}
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	own, err := readOwnGroups()
	if err != nil {
		return nil, err
	}
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
	return ""
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

// New makes the group of one command.
func (m *Manager) New() (*Group, error) {
	name := fmt.Sprintf("call-%d", m.seq.Add(1))
	g := &Group{m: m, v2fd: -1, v1: map[string]string{}}
	if m.v2 != "" {
		dir := filepath.Join(m.v2, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("making control group %s: %w", dir, err)
		}
		g.v2 = dir
		if m.v2procs {
			if err := writeLimit(dir, "pids.max", strconv.Itoa(m.limits.MaxProcs)); err != nil {
				g.Remove()
				return nil, err
			}
		}
		if m.v2mem {
			if err := writeLimit(dir, "memory.max", strconv.FormatInt(m.limits.MaxMemory, 10)); err != nil {
				g.Remove()
				return nil, err
			}
			_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
		}
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
		var err error
		switch c {
		case "pids":
			// One more than asked: the launching thread sits in the group
			// until the command has started.
			err = writeLimit(dir, "pids.max", strconv.Itoa(m.limits.MaxProcs+1))
		case "memory":
			err = writeLimit(dir, "memory.limit_in_bytes", strconv.FormatInt(m.limits.MaxMemory, 10))
			if err == nil {
				// Without this the swap the host has would lift the limit.
				_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(m.limits.MaxMemory, 10)), 0)
			}
		}
		if err != nil {
			g.Remove()
			return nil, err
		}
	}
	return g, nil
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
// is left. It reports whether the group was seen empty.
func (g *Group) Kill(timeout time.Duration) bool {
	if g.v2 != "" {
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
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		for _, d := range g.dirs() {
			killMembers(d)
		}
		time.Sleep(wait)
	}
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

// Close removes this process's folders. Groups still in use are left.
func (m *Manager) Close() {
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
// no longer run (killed with SIGKILL, or a crash), and removes them.
func (m *Manager) cleanStale(dir string, v2 bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "toolsvc-")
		pid, _, _ := strings.Cut(rest, "-")
		if !e.IsDir() || !ok {
			continue
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() || unix.Kill(n, 0) == nil {
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

// members lists the processes in one folder (not below it).
func members(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n != os.Getpid() {
			out = append(out, n)
		}
	}
	return out
}

func killMembers(dir string) {
	for _, pid := range members(dir) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// mountTable holds where the cgroup file systems are mounted: the unified
// hierarchy, and the legacy one of each controller used here.
type mountTable struct {
	v2 string
	v1 map[string]string
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
