package gctune

import (
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// LimitMemory sets the runtime's soft memory limit (what GOMEMLIMIT sets)
// below the memory limit of the process's control group, when it has one
// and the operator has not set GOMEMLIMIT: the collector then works harder
// as the heap nears the limit, instead of the kernel's OOM killer ending
// the service when a large call meets a raised GC goal. The limit is the
// lowest memory.max (cgroup v2) of the group and its ancestors, less a
// tenth for what is not heap (stacks, the runtime, the binary). It
// returns the limit set, or 0 when none was.
func LimitMemory() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := cgroupLimit("/proc/self/cgroup", "/sys/fs/cgroup")
	if limit <= 0 {
		return 0
	}
	limit -= limit / 10
	debug.SetMemoryLimit(limit)
	return limit
}

// cgroupLimit reads the process's cgroup v2 path from procFile and
// returns the lowest memory.max on the way from that group up to root
// (the cgroup2 mount), or 0 when none is set or it cannot be read.
func cgroupLimit(procFile, root string) int64 {
	data, err := os.ReadFile(procFile)
	if err != nil {
		return 0
	}
	var group string
	for _, line := range strings.Split(string(data), "\n") {
		if g, ok := strings.CutPrefix(line, "0::"); ok {
			group = g
		}
	}
	if group == "" {
		return 0
	}
	var lowest int64
	for p := path.Clean("/" + group); ; p = path.Dir(p) {
		if b, err := os.ReadFile(path.Join(root, p, "memory.max")); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (lowest == 0 || n < lowest) {
				lowest = n
			}
		}
		if p == "/" {
			return lowest
		}
	}
}
