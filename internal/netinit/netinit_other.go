//go:build !linux

package netinit

import "io"

// Run reports false: network namespaces are Linux-only, and the sandbox
// refuses Egress elsewhere, so nothing starts this package's program.
func Run(errOut io.Writer) (ran bool, status int) { return false, 0 }
