//go:build unix

package procgroup

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Prepare sets cmd up to start in a new session (setsid: a new process
// group with the command as leader, and no controlling terminal to inject
// keystrokes into). When cmd's context is done the whole group is killed;
// waitDelay bounds how long Wait then waits for the output pipes.
func Prepare(cmd *exec.Cmd, waitDelay time.Duration) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	// No Pdeathsig: it fires when the forking OS thread exits, not the
	// process (golang/go#27505), and could kill a healthy command.
	cmd.Cancel = func() error { return Kill(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
}

// Kill sends SIGKILL to every process of the group pgid. A group that is
// already gone is not an error.
func Kill(pgid int) error {
	if pgid <= 1 {
		return errors.New("procgroup: refusing to kill a group id <= 1")
	}
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Alive reports whether any process of the group pgid still exists.
func Alive(pgid int) bool {
	return pgid > 1 && syscall.Kill(-pgid, 0) == nil
}

// awaitGone waits until no process of the group is left alive, at most
// max. Killed members other than the leader were children of the leader;
// they go to init (or a subreaper) and stay zombies until it reaps them,
// which some inits do only now and then. A zombie is dead and holds
// nothing, so the wait ends when only zombies are left. A member still
// alive after timeout (it cannot happen with SIGKILL short of a stuck kernel
// call) is left to its reaper rather than blocking the call.
func awaitGone(pgid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for wait := 50 * time.Microsecond; Alive(pgid) && len(LiveMembers(pgid)) > 0 && time.Now().Before(deadline); wait = min(2*wait, 10*time.Millisecond) {
		_ = Kill(pgid)
		time.Sleep(wait)
	}
}

// LiveMembers returns the processes of group pgid that are not zombies, by
// reading /proc.
func LiveMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := ReadStat(pid)
		if !ok || st.State == "Z" || st.State == "X" {
			continue
		}
		if st.Pgrp == pgid {
			live = append(live, pid)
		}
	}
	return live
}

// Stat is what /proc/<pid>/stat says of a process's place in the tree.
type Stat struct {
	State               string // R, S, D, Z (dead, not yet reaped), X...
	PPid, Pgrp, Session int
	// StartTime is when the process started, in clock ticks since boot:
	// a process started by another starts no earlier than it.
	StartTime uint64
	// CPU is the processor time of the process and of its children it
	// waited for (utime, stime, cutime, cstime), in clock ticks.
	CPU uint64
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times, on Linux.
const clockTicks = 100

// CPUTime is CPU as a duration.
func (st Stat) CPUTime() time.Duration {
	return time.Duration(st.CPU) * time.Second / clockTicks
}

// ReadStat reads /proc/<pid>/stat. ok is false when the process is gone or
// the system has no /proc.
func ReadStat(pid int) (st Stat, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return st, false
	}
	// pid (comm) state ppid pgrp session ...; comm may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return st, false
	}
	st.State = f[0]
	st.PPid, _ = strconv.Atoi(f[1])
	st.Pgrp, _ = strconv.Atoi(f[2])
	st.Session, _ = strconv.Atoi(f[3])
	st.StartTime, _ = strconv.ParseUint(f[19], 10, 64) // field 22 of proc(5)
	// utime, stime, cutime, cstime: fields 14-17 of proc(5).
	for _, i := range []int{11, 12, 13, 14} {
		n, _ := strconv.ParseUint(f[i], 10, 64)
		st.CPU += n
	}
	return st, true
}
