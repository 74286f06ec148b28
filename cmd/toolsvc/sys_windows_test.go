package main

import (
	"errors"
	"os/exec"
	"syscall"
)

// Stand-ins for the Unix calls of sys_unix_test.go: each fails, so a test
// that needs one fails rather than passing without checking.

func sysKill(int, syscall.Signal) error { return errors.New("no kill(2) on Windows") }

func mkfifo(string, uint32) error { return errors.New("no FIFOs on Windows") }

func asUser(*exec.Cmd, uint32, uint32) error { return errors.New("no setuid on Windows") }
