// Package netinit is the first program of a command that reaches the
// network only through the service's proxy (the sandbox's Egress) where
// the service may not make network namespaces itself (it is not root, or
// lacks CAP_SYS_ADMIN).
//
// The sandbox then starts the command in a user and a network namespace
// of its own (clone flags), as the service's own binary re-executed with
// a marker (Args): the process holds capabilities in its new user
// namespace until it executes a program, and is given CAP_NET_ADMIN and
// CAP_SETPCAP across that one execution as ambient capabilities. Run,
// called first thing in main, sees the marker and, as that process:
// brings the namespace's loopback up, listens on the proxy's address
// there, hands the listener to the service over a socket it inherited
// (SCM_RIGHTS), gives up every capability, and executes the command in
// its place. Under bubblewrap, which makes the namespace and brings
// loopback up itself, only the listening and handing over are left.
//
// The marker is an option, not a word: a program that does not call Run
// rejects it at once (as Go's flag package rejects an unknown option)
// rather than starting as itself inside a command's sandbox.
package netinit

import "strconv"

// flagName marks the re-executed binary as this package's: the option
// -toolsvc-netinit=FD, FD being the socket to hand the listener over.
const flagName = "-toolsvc-netinit="

// Args returns the command line that runs exe as the first program of a
// command, handing its listener over on descriptor fd (as the command
// inherits it), then executing argv (an absolute program path and its
// arguments).
func Args(exe string, fd int, argv []string) []string {
	return append([]string{exe, flagName + strconv.Itoa(fd), "--"}, argv...)
}
