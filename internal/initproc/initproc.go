// Package initproc lets the service be the first process of its PID
// namespace, as it is in a container started without an init.
//
// PID 1 inherits every process whose parent dies, and must reap them: the
// kernel keeps a dead process's entry until its parent collects it. The
// service's children leave such orphans: bubblewrap ends before the first
// process of its sandbox has been collected (one on every command run
// under it), and the processes the service kills as a whole (a command's
// background jobs, a browser's helpers) may have lost their parent first.
// Under an init that reaps (systemd, tini, `docker run --init`) they go at
// once; with the service itself as PID 1 they would pile up until no
// process ID is left. The service cannot reap
// processes it did not start without racing the waits of those it did
// (os/exec collects its own children), so as PID 1 it starts itself again
// as its only child and stays behind as a small init, as tini does.
package initproc
