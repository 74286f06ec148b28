//go:build unix

package memory

import "syscall"

// cpuTime is the CPU time the process has used, which, unlike the time on
// the clock, does not grow when other programs load the machine.
func cpuTime() int64 {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return r.Utime.Nano() + r.Stime.Nano()
}
