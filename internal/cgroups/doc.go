// Package cgroups gives each command exec runs a control group of its own:
// a ceiling on its processes and memory, and a way to kill every process
// it started, however it detached (setsid, double fork, daemon(3)), because
// a process cannot leave its control group without write access to another
// one, which the sandbox does not give.
//
// Both kernel interfaces are used as found. The unified hierarchy (cgroup
// v2) places the command in its group as it is created (clone3 with
// CLONE_INTO_CGROUP) and kills the group in one write (cgroup.kill). The
// legacy hierarchies (cgroup v1, still common on hosts and in CI machines)
// carry the pids and memory controllers where v2 has none; there the
// launching thread enters the group before it forks, so the child is born
// inside it too. On a hybrid host the two are combined: v2 for membership
// and killing, v1 for the limits. v2 is used only where a trial process
// can be started inside a group that way.
//
// Groups are reused: making and removing a group costs more than a short
// command, so a group whose command ended and left nothing behind waits in
// a small pool for the next command, which gets it only once no process or
// thread is in it, with its limits written again.
package cgroups
