//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// The end-to-end tests signal processes, make FIFOs and start programs as
// another user; these are the Unix calls, with stand-ins elsewhere.

func sysKill(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

func mkfifo(path string, mode uint32) error { return syscall.Mkfifo(path, mode) }

// asUser makes cmd run as uid and gid (the test must be root).
func asUser(cmd *exec.Cmd, uid, gid uint32) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	return nil
}
