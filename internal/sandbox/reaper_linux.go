package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/procgroup"
)

// Keeping track of a command's processes where there is neither a PID
// namespace nor a control group (a service that is not root, outside
// bubblewrap): the service becomes its processes' child subreaper, so
// that a process whose parent dies is handed to the service instead of to
// init, however it detached, and reaps it. The call's processes are found
// by the call's Landlock domain where the kernel scopes signals (Linux
// 6.12): they are the processes its launching thread may signal, and
// nothing a process does takes it out of its domain (sweepDomain). On an
// older kernel they are found by a mark each command's environment
// carries, which a process that replaces its whole environment drops
// (sweep): the sandbox then does not claim to contain them.

// markVar names the environment variable holding a call's mark.
const markVar = "EXEC_CALL_MARK"

// becomeSubreaper makes the service the reaper of its descendants' orphans.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// newMark returns a fresh random mark.
func newMark() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sweep kills every process that carries mark, wherever it is in the
// process tree, and reaps every dead child of the service that is not the
// shell of a running command (isLeader): as the subreaper, the service
// inherits every orphan of its commands, and nobody else would reap them;
// a process another part of the service started and waits for (the
// browser) loses only its exit status, which nothing reads. It goes on
// until two passes in a row find no process carrying the mark, at most
// limit, and reports whether that point was reached.
// Each pass holds pause, so that no command starts while it reaps.
func sweep(mark string, leader int, isLeader func(int) bool, pause sync.Locker, limit time.Duration) bool {
	needle := []byte(markVar + "=" + mark + "\x00")
	return untilClean(limit, func() (found bool) {
		pause.Lock()
		defer pause.Unlock()
		for _, p := range processes() {
			if p.pid == leader {
				continue // the command's shell: os/exec reaps it
			}
			env, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
			switch {
			case bytes.Contains(env, needle):
				found = true
				_ = unix.Kill(p.pid, unix.SIGKILL)
				if p.child {
					reap(p.pid)
				}
			case p.child && p.zombie && !isLeader(p.pid):
				reap(p.pid)
			}
		}
		return found
	})
}

// untilClean runs pass, which reports whether it found a process to
// kill, until two passes in a row find none (true), or, past limit, until
// the deadline (whether the last pass found none); with limit 0, until a
// pass finds none. The passes are a little further apart each time.
func untilClean(limit time.Duration, pass func() bool) bool {
	deadline := time.Now().Add(limit)
	clean := 0
	for wait := 200 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		found := pass()
		if found {
			clean = 0
		} else if clean++; clean >= 2 {
			return true
		}
		if limit > 0 && time.Now().After(deadline) || limit == 0 && !found {
			return !found
		}
		time.Sleep(wait)
	}
}

// sweepDomain runs on a call's launching thread, which is in the call's
// Landlock domain with signals scoped: of the processes started no
// earlier than the command's first process (since), it kills every one
// the thread may signal, which is every process in the call's domain and
// none other, and reaps those that are the service's children. Every
// process in /proc is asked, whatever its account (a process that made
// itself undumpable shows as root's there): kill(pid, 0) answers at once
// for those outside the domain, and only the others' status is read. The
// command's shell (leader) is left to os/exec. It goes on as sweep does,
// until two passes in a row find none.
func sweepDomain(leader int, since uint64, limit time.Duration) bool {
	self := os.Getpid()
	return untilClean(limit, func() (found bool) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			// kill(pid, 0) from this thread is refused for every process
			// outside the call's domain.
			if err != nil || pid == self || pid == leader || unix.Kill(pid, 0) != nil {
				continue
			}
			st, ok := procgroup.ReadStat(pid)
			if !ok || st.StartTime < since {
				continue
			}
			if st.State != "Z" {
				found = true
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			if st.PPid == self {
				reap(pid)
			}
		}
		return found
	})
}

// reap collects a child that is dead or about to be (it was just killed).
func reap(pid int) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err != unix.EINTR {
			return
		}
	}
}

type process struct {
	pid, pgid, sid int
	child, zombie  bool // a child of the service; dead, waiting to be reaped
}

// processes lists the processes of the service's own user from /proc
// (others cannot carry a mark the service can read).
func processes() []process {
	self, uid := os.Getpid(), os.Getuid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if fi, err := e.Info(); err != nil {
			continue
		} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
			continue
		}
		st, ok := procgroup.ReadStat(pid)
		if !ok {
			continue
		}
		out = append(out, process{pid: pid, pgid: st.Pgrp, sid: st.Session, child: st.PPid == self, zombie: st.State == "Z"})
	}
	return out
}
