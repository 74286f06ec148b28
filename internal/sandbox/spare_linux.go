package sandbox

import (
	"net"

	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/cgroups"
)

// spare is a launching thread confined ahead of its command: in its
// control group, with its own mounts, Landlock domain and seccomp filter
// in force, waiting for the command to fork. Making and confining a
// thread is most of what the service itself spends on a command (a new
// mount namespace with /proc and the tmpfs, the Landlock rules, the
// seccomp program compiled for the thread, the moves into v1 control
// groups); a spare does it while no call waits, and a call takes it
// ready. Only commands whose temporary folder the sandbox makes itself
// (FreshTemp) can use one: the rules and mounts name that folder.
//
// With Egress, where the launching thread makes the command's network
// namespace (CAP_SYS_ADMIN), a spare's thread is also in a namespace of
// its own, with its listener: both go to the command that takes it, as a
// thread confined on the spot would have them, or end with it unused.
// (Where each command's first program makes its namespace, the spare is
// only the confined thread, and starts nothing ahead: see warmable.) Making a
// namespace with loopback up and a listener costs its thread about 0.8
// ms (BenchmarkEgressNamespace, against 35 µs for the thread alone), a
// quarter to a third of what starting a command on the spot costs
// (BenchmarkEgressStart): a spare keeps that off the call's path, for one
// idle namespace and socket held while no call waits.
//
// A spare holds its confinement, never a decision about the command: the
// command's credentials, environment, folder and descriptors are set when
// it forks, as for a thread confined on the spot. Where every command
// starts the same way (bubblewrap, or a shell first in a PID namespace
// of its own) the thread also starts that ahead (warm_linux.go); the
// command's environment and folder are then set inside it.
type spare struct {
	group  *cgroups.Group
	marks  []fileMark   // the paths the confinement named, as they were
	run    chan func()  // the fork, run on the spare's thread; closed to end it unused
	warm   *warm        // the command's sandbox started ahead, or nil
	egress net.Listener // in the thread's network namespace; nil without Egress or once taken
	s      *Sandbox
}

// fileMark is what a path was when a spare's confinement was built: gone,
// or which file it was. The file is held open (O_PATH) for as long as the
// spare waits: a file system gives a freed inode's number to the next
// file it makes, so that a folder removed and replaced at once by a link
// could otherwise look like the same file.
type fileMark struct {
	path   string
	follow bool // the path's last link is followed, as the mounts and rules do
	fd     int  // the file, or -1: the path did not exist
}

// marks records the paths whose identity a spare's confinement depends
// on: the folder its tmpfs is mounted on (were it removed, the mount would
// go with it, and the name could lead elsewhere by the time the command
// runs), the private paths covered by mounts (a path made or replaced
// later would not be covered) and the folders the Landlock rules grant
// (rules name the file opened when they were built).
func (s *Sandbox) marks(tmpDir string) []fileMark {
	if s.mode == Bwrap {
		return s.bwrapMarks()
	}
	if !s.mountns {
		return nil
	}
	out := []fileMark{markPath(tmpDir, false)}
	if s.mode == Landlock {
		for _, p := range append(append([]string{s.ws}, s.writable...), s.hidden...) {
			out = append(out, markPath(p, true))
		}
	}
	return out
}

func markPath(path string, follow bool) fileMark {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		fd = -1
	}
	return fileMark{path: path, follow: follow, fd: fd}
}

// unchanged reports whether every path still names the file it named
// when the marks were made, or is still missing.
func unchanged(marks []fileMark) bool {
	for _, m := range marks {
		var now unix.Stat_t
		var err error
		if m.follow {
			err = unix.Stat(m.path, &now)
		} else {
			err = unix.Lstat(m.path, &now)
		}
		if m.fd < 0 || err != nil {
			if (m.fd < 0) != (err != nil) {
				return false
			}
			continue
		}
		var then unix.Stat_t
		if unix.Fstat(m.fd, &then) != nil || then.Dev != now.Dev || then.Ino != now.Ino {
			return false
		}
	}
	return true
}

// closeMarks lets the marked files go.
func closeMarks(marks []fileMark) {
	for _, m := range marks {
		if m.fd >= 0 {
			unix.Close(m.fd)
		}
	}
}

// spareFor reports whether a command with temporary folder tmpDir can
// start from a spare.
func (s *Sandbox) spareFor(tmpDir string) bool {
	d, ok := s.FreshTemp()
	return ok && d == tmpDir
}

// takeSpare returns a spare confined for tmpDir, or nil when there is
// none ready or the paths it depends on changed since it was made (it is
// then ended unused). The next is made when the command has ended (see
// Child.cleanup), not now: it would compete for the processor with the
// command starting.
func (s *Sandbox) takeSpare(tmpDir string) *spare {
	if !s.spareFor(tmpDir) {
		return nil
	}
	s.spareMu.Lock()
	// One being made is further along than a thread this call would
	// start confining now: calls in quick succession wait for it.
	for s.spare == nil && s.warming {
		s.warmed.Wait()
	}
	sp := s.spare
	s.spare = nil
	s.spareMu.Unlock()
	if sp == nil {
		return nil
	}
	ok := unchanged(sp.marks)
	closeMarks(sp.marks)
	sp.marks = nil
	if !ok {
		sp.end()
		return nil
	}
	return sp
}

// makeSpare confines a thread for a command with the temporary folder the
// sandbox makes (FreshTemp) and keeps it as the spare, unless one is there or being made. A thread
// that fails to confine itself is dropped without a word: the command
// that would have used it confines a thread on the spot, and reports the
// failure if it happens again.
func (s *Sandbox) makeSpare() {
	s.spareMu.Lock()
	if !s.spares || s.spare != nil || s.warming {
		s.spareMu.Unlock()
		return
	}
	s.warming = true
	s.spareMu.Unlock()
	tmpDir, _ := s.FreshTemp()
	sp := s.newSpare(tmpDir)
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	s.warming = false
	s.warmed.Broadcast()
	if sp == nil {
		return
	}
	if !s.spares {
		sp.end()
		return
	}
	s.spare = sp
}

// newSpare makes and confines a spare's thread, or returns nil.
func (s *Sandbox) newSpare(tmpDir string) *spare {
	sp := &spare{run: make(chan func()), s: s}
	if s.cg != nil {
		g, err := s.cg.Get()
		if err != nil {
			return nil
		}
		sp.group = g
	}
	ready := make(chan bool, 1)
	onDisposableThread(func() {
		sp.marks = s.marks(tmpDir) // before the thread's mounts hide anything
		ln, err := s.confineThread(sp.group, tmpDir)
		if err != nil {
			ready <- false
			return
		}
		sp.egress = ln
		if s.warmable() {
			sp.warm = s.startWarm(sp, tmpDir)
		}
		ready <- true
		if launch, ok := <-sp.run; ok {
			launch()
		}
	})
	if !<-ready {
		closeMarks(sp.marks)
		if sp.group != nil {
			sp.group.Release()
		}
		return nil
	}
	return sp
}

// end ends an unused spare's thread and gives its control group back.
func (sp *spare) end() {
	closeMarks(sp.marks)
	sp.marks = nil
	if sp.warm != nil {
		sp.warm.end(sp.s)
		sp.warm = nil
	}
	close(sp.run)
	if sp.egress != nil {
		sp.egress.Close()
		sp.egress = nil
	}
	if sp.group != nil {
		sp.group.Release()
	}
}

// stopSpares ends the spare, waits for one being made, and makes no more.
func (s *Sandbox) stopSpares() {
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	s.spares = false
	for s.warming {
		s.warmed.Wait()
	}
	if s.spare != nil {
		s.spare.end()
		s.spare = nil
	}
}
