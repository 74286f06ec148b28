//go:build unix

package tools

import "syscall"

// openDir is or'ed into the flags of an open that must find a folder:
// should the folder be swapped for a pipe meanwhile, the open fails
// instead of blocking.
const openDir = syscall.O_DIRECTORY
