package sandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// How a command's processes are kept to its call where the service cannot
// make a PID namespace by privilege (it is not root, or has no
// CAP_SYS_ADMIN, as in a container), in None and Landlock modes:
//
//   - On Linux 6.12 and later (Landlock ABI 6), each call's launching
//     thread enters a Landlock domain of its own that scopes signals, in
//     None mode too (a domain that restricts nothing else). A process in
//     it can signal only processes in the same domain or below: those its
//     call started. The same domain tells the service which processes are
//     the call's: the launching thread is in it, so the processes that
//     thread may signal are exactly the call's, however they detached or
//     whatever they did to their environment (see sweepDomain).
//   - Elsewhere, each command is the first process of a PID namespace in
//     a user namespace of its own, where the kernel lets an unprivileged
//     process make one: signals reach only that namespace, and every
//     process in it ends with the command.

// scopeAvailable reports whether the kernel scopes signals by Landlock
// domain (ABI 6, Linux 6.12).
func (s *Sandbox) scopeAvailable() bool {
	if s.noScope {
		return false
	}
	abi, err := llsys.LandlockGetABIVersion()
	return err == nil && abi >= 6
}

// threadDomain puts the calling thread in a Landlock domain of its own
// that restricts no file access, in the modes without Landlock's file
// rules (None, and Bwrap, whose mounts a domain handling no file access
// leaves alone). It scopes signals where the sandbox does (what None mode
// adds to keep a command's signals in its call); with Egress and
// Landlock's network rules (ABI 4) it lets TCP connect to the proxy's
// port only, and bind none. no_new_privs must be set first. The
// configuration is exact, not best effort: on a kernel that cannot scope
// signals, building the rules fails rather than leaving the thread
// unscoped, which sweepDomain relies on.
func (s *Sandbox) threadDomain() error {
	var cfg landlock.Config
	var rules []landlock.Rule
	if s.scoped {
		cfg.Scoped = landlock.ScopedSet(llsys.ScopeSignal)
	}
	if s.egressTCP {
		cfg.HandledAccessNet = landlock.AccessNetSet(llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP)
		rules = append(rules, s.egressRules()...)
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("building the Landlock rules of mode %s: %w", s.mode, err)
	}
	if fd < 0 {
		return fmt.Errorf("the kernel enforces none of the Landlock rules of mode %s", s.mode)
	}
	rs := &landlockRules{fd: fd, flags: flags}
	defer rs.close()
	return rs.restrictSelf()
}

// egressPort is EgressAddr's port, which the Landlock rules let commands
// connect to.
const egressPort = 3128

// egressRules are the Landlock network rules of a command with Egress:
// TCP may connect to the proxy's port, and bind it only where the
// command's first program listens there (see netinit); once it has, the
// listener keeps the port taken for as long as the command runs.
func (s *Sandbox) egressRules() []landlock.Rule {
	rules := []landlock.Rule{landlock.ConnectTCP(egressPort)}
	if s.netinit != "" {
		rules = append(rules, landlock.BindTCP(egressPort))
	}
	return rules
}

// tryUserNamespace gives each command a PID namespace inside a user
// namespace of its own, and keeps that when a trial command runs in it.
// Not with TOOLSVC_EXEC_USER: only root may map another account, and
// root mapped into the namespace would hold every capability there.
func (s *Sandbox) tryUserNamespace() {
	if s.user != nil {
		s.parts = append(s.parts, "no PID namespace (commands run as another account, which a user namespace of their own could not map)")
		return
	}
	if s.noUserns {
		s.parts = append(s.parts, "no PID namespace in a user namespace (turned off)")
		return
	}
	s.pidns, s.userns = true, true
	if err := s.trial(); err != nil {
		s.pidns, s.userns = false, false
		s.parts = append(s.parts, fmt.Sprintf("no PID namespace in a user namespace (%v)", err))
	}
}

// usernsIdentity says who a command in a user namespace sees itself as.
// The namespace maps no account: the service, undumpable, could not write
// the map of a child it starts, and root mapped into it would hold every
// capability there.
func (s *Sandbox) usernsIdentity() string {
	return "nobody (uid 65534, as its user namespace maps no account; files are still read and written as the service's)"
}
