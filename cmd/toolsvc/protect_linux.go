package main

import "golang.org/x/sys/unix"

// protectProcess makes the service's memory, environment and descriptors
// unreadable through /proc to processes of its own user that lack
// CAP_SYS_PTRACE: a command run by exec under the same account (a non-root
// service, or a none sandbox) cannot read the API keys from
// /proc/<service>/environ. It also turns off core dumps, which would hold
// the same secrets.
func protectProcess() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
