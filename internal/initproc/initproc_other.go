//go:build !linux

package initproc

import "io"

// Run reports false: only Linux runs services as the first process of a
// PID namespace (containers).
func Run(errOut io.Writer) (ran bool, status int) { return false, 0 }
