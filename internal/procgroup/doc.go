// Package procgroup runs a command as the leader of its own session and
// process group, so that the command and everything it starts can be
// killed together, and so that a descendant holding the output pipes open
// cannot keep the caller waiting.
package procgroup
