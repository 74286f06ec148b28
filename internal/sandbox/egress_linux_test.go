package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests in this file give commands a network allowlist (Egress): a
// tiny proxy serving each command's listener answers "via-egress" to
// everything, and the commands try every other way out, towards
// listeners the test runs in the host's network namespace, which count
// what reaches them.

// viaEgress is what the test's proxy answers.
const viaEgress = "via-egress"

// egressProxy serves a command's Egress listener as a forward proxy that
// answers viaEgress to every request, and counts the connections.
type egressProxy struct {
	ln    net.Listener
	conns atomic.Int64
	done  chan error // the error Accept ended with, once it has
}

func serveEgress(ln net.Listener) *egressProxy {
	p := &egressProxy{ln: ln, done: make(chan error, 1)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				p.done <- err
				return
			}
			p.conns.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(viaEgress), viaEgress)
			}()
		}
	}()
	return p
}

// egressEnv is a command's environment: the PATH leaves pyenv's shims
// (under /root, hidden by bubblewrap) out.
func egressEnv(ws, childTmp string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + ws, "TMPDIR=" + childTmp, "LANG=C"}
}

// runEgress runs script in s as exec does, serving its Egress listener
// while it runs, and checks that the sandbox closed the listener once
// the command was cleaned up. It returns the output and how many
// connections reached the proxy.
func runEgress(t *testing.T, s *Sandbox, ws, script string) (string, int64) {
	t.Helper()
	tmp := tempFor(t, s)
	path, args, childTmp := s.Command(tmp, []string{"/bin/sh", "-c", script})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = ws
	cmd.Env = egressEnv(ws, childTmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := s.StartContext(ctx, cmd, tmp)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	ln := c.Egress()
	if ln == nil {
		t.Fatal("a command of a sandbox with Egress has no listener")
	}
	if got := ln.Addr().String(); got != EgressAddr {
		t.Errorf("the listener is on %s, want %s", got, EgressAddr)
	}
	p := serveEgress(ln)
	c.Wait()
	select {
	case err := <-p.done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept ended with %v, want the listener closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the listener was not closed when the command was cleaned up")
	}
	return out.String(), p.conns.Load()
}

// hostAddrs returns the host's first global IPv4 and IPv6 addresses that
// are not loopback ("" for none).
func hostAddrs() (v4, v6 string) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || !ipn.IP.IsGlobalUnicast() {
			continue
		}
		if ipn.IP.To4() != nil {
			if v4 == "" {
				v4 = ipn.IP.String()
			}
		} else if v6 == "" {
			v6 = ipn.IP.String()
		}
	}
	return v4, v6
}

// hostTarget is a listener in the host's network namespace.
type hostTarget struct {
	network, host, port string
}

// egressTargets adds to l (loopback TCP and UDP, Unix sockets by path
// and an abstract one) TCP and UDP listeners on ::1 and on the host's
// non-loopback addresses, and returns the IP ones.
func egressTargets(t *testing.T, l *listeners) []hostTarget {
	t.Helper()
	udpHost, udpPort, _ := net.SplitHostPort(l.udpAddr)
	targets := []hostTarget{{"tcp", "127.0.0.1", l.tcpPort}, {"udp", udpHost, udpPort}}
	v4, v6 := hostAddrs()
	for _, h := range []string{"::1", v4, v6} {
		if h == "" {
			continue
		}
		tcp, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
		if err != nil {
			t.Logf("no TCP listener on %s: %v", h, err)
			continue
		}
		l.serve(tcp)
		_, port, _ := net.SplitHostPort(tcp.Addr().String())
		targets = append(targets, hostTarget{"tcp", h, port})
		udp, err := net.ListenPacket("udp", net.JoinHostPort(h, "0"))
		if err != nil {
			t.Fatal(err)
		}
		l.closers = append(l.closers, func() { udp.Close() })
		go func() {
			buf := make([]byte, 64)
			for {
				if _, _, err := udp.ReadFrom(buf); err != nil {
					return
				}
				l.hits.Add(1)
			}
		}()
		_, port, _ = net.SplitHostPort(udp.LocalAddr().String())
		targets = append(targets, hostTarget{"udp", h, port})
	}
	return targets
}

// egressProbe is a Python program the commands run: each probe prints
// REACHED (or SENT, BOUND) when the operation went through, else BLOCKED
// and why.
const egressProbe = `import socket, sys
kind, a = sys.argv[1], sys.argv[2:]
def fam(h):
    return socket.AF_INET6 if ":" in h else socket.AF_INET
try:
    if kind == "tcp":
        s = socket.socket(fam(a[0]), socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect((a[0], int(a[1])))
        s.sendall(b"ESCAPED\n")
        print("REACHED")
    elif kind == "udp":
        s = socket.socket(fam(a[0]), socket.SOCK_DGRAM)
        for _ in range(3):
            s.sendto(b"ESCAPED\n", (a[0], int(a[1])))
        print("SENT")
    elif kind == "raw":
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        print("REACHED")
    elif kind == "raw6":
        socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
        print("REACHED")
    elif kind == "packet":
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300)
        print("REACHED")
    elif kind == "vsock":
        s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect((2, 1))
        print("REACHED")
    elif kind == "netlink":
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        print("REACHED")
    elif kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect("\0" + a[0][1:] if a[0].startswith("@") else a[0])
        s.sendall(b"ESCAPED\n")
        print("REACHED")
    elif kind == "bind":
        s = socket.socket(fam(a[0]), socket.SOCK_STREAM)
        s.bind((a[0], int(a[1])))
        s.listen()
        print("BOUND")
    elif kind == "dns":
        print("REACHED", socket.getaddrinfo(a[0], 80))
    else:
        print("unknown probe", kind)
        sys.exit(2)
except Exception as e:
    print("BLOCKED", type(e).__name__, e)
`

// egressModes are the modes the allowlist is tried in.
var egressModes = []Mode{Landlock, Bwrap, None}

// newEgress returns a sandbox of mode with Egress over af's workspace,
// or, where this identity cannot have one, checks that New says so with
// ErrEgressUnavailable and skips.
func newEgress(t *testing.T, mode Mode, af attackFixture, opts Options) *Sandbox {
	t.Helper()
	opts.Mode, opts.Egress, opts.Workspace = mode, true, af.ws
	opts.Private = append(opts.Private, af.data, af.private)
	s, err := New(opts)
	if errors.Is(err, ErrEgressUnavailable) {
		if egressExpected() || userNamespaces() {
			t.Fatalf("Egress refused as uid %d, with CAP_SYS_ADMIN or user namespaces: %v", os.Geteuid(), err)
		}
		if !strings.Contains(strings.ToLower(err.Error()), "run the service as root") {
			t.Errorf("the refusal does not say what to do: %v", err)
		}
		t.Skipf("EGRESS NOT AVAILABLE as uid %d (refused as it must be): %v", os.Geteuid(), err)
	}
	if err != nil {
		// The mode itself is missing here: as newForTest judges it.
		opts.Egress = false
		newForTest(t, mode, opts).Close()
		t.Fatalf("mode %s works without Egress but not with it: %v", mode, err)
	}
	t.Cleanup(s.Close)
	return s
}

// userNamespaces reports whether this process may start one in a user
// and network namespace of its own, where Egress must be available too.
func userNamespaces() bool {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET}
	return cmd.Run() == nil
}

// egressExpected reports whether this process can make network
// namespaces (CAP_SYS_ADMIN in its effective set), where Egress must be
// available.
func egressExpected() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	m := regexp.MustCompile(`(?m)^CapEff:\s+([0-9a-f]+)$`).FindSubmatch(b)
	if m == nil {
		return false
	}
	caps, _ := strconv.ParseUint(string(m[1]), 16, 64)
	return caps&(1<<21) != 0 // CAP_SYS_ADMIN
}

// TestEgressAttacks: a command with Egress reaches the proxy by its
// address and through the proxy variables, and every other way out fails
// without a byte reaching the host: TCP and UDP to the host's loopback
// (IPv4 and IPv6) and non-loopback addresses, DNS, raw, packet, vsock and
// netlink sockets, the host's abstract and path Unix sockets. Binding a
// port is refused where Landlock rules the command's TCP.
func TestEgressAttacks(t *testing.T) {
	l := newListeners(t)
	targets := egressTargets(t, l)
	for _, mode := range egressModes {
		t.Run(string(mode), func(t *testing.T) {
			af := newAttackFixture(t)
			s := newEgress(t, mode, af, Options{})
			t.Log(s.Describe())
			if !s.Egress() || s.Network() || !s.NetworkEnforced() {
				t.Fatalf("Egress %v, Network %v, NetworkEnforced %v", s.Egress(), s.Network(), s.NetworkEnforced())
			}
			probe := filepath.Join(af.ws, "probe.py")
			if err := os.WriteFile(probe, []byte(egressProbe), 0o644); err != nil {
				t.Fatal(err)
			}
			py := "/usr/bin/python3 " + probe

			// The way out.
			for _, script := range []string{
				"curl -s -m 10 -x http://" + EgressAddr + " http://example.invalid/",
				"http_proxy=http://" + EgressAddr + " curl -s -m 10 http://x.invalid/",
				"HTTPS_PROXY=http://" + EgressAddr + " http_proxy=http://" + EgressAddr +
					` /usr/bin/python3 -c 'import urllib.request; print(urllib.request.urlopen("http://x.invalid/", timeout=10).read().decode(), end="")'`,
			} {
				out, conns := runEgress(t, s, af.ws, script)
				if out != viaEgress || conns != 1 {
					t.Errorf("%s: %q, %d connections to the proxy", script, out, conns)
				}
			}

			before := l.hits.Load()
			type attack struct{ name, script, want string }
			var attacks []attack
			for _, tg := range targets {
				hp := net.JoinHostPort(tg.host, tg.port)
				if tg.network == "tcp" {
					attacks = append(attacks,
						attack{"curl " + hp, "curl --noproxy '*' -g -s -m 5 http://" + hp + "/; echo curl=$?", "curl="},
						attack{"python tcp " + hp, py + " tcp " + tg.host + " " + tg.port, "BLOCKED"},
						attack{"attack tcp " + hp, af.attack + " tcp " + hp, "DENIED"},
					)
					if tg.host != "127.0.0.1" {
						// The proxy's port at another address: Landlock
						// lets it connect, the namespace has nothing there.
						attacks = append(attacks, attack{"python tcp " + tg.host + " proxy port", py + " tcp " + tg.host + " 3128", "BLOCKED"})
					}
				} else {
					// A datagram to 127.0.0.1 may be sent, to the
					// namespace's own loopback: what counts is that none
					// reaches the host.
					attacks = append(attacks, attack{"python udp " + hp, py + " udp " + tg.host + " " + tg.port, ""})
				}
			}
			for _, p := range append([]string{l.abstract}, l.unixPaths...) {
				attacks = append(attacks,
					attack{"python unix " + p, py + " unix " + p, "BLOCKED"},
					attack{"attack unix " + p, af.attack + " unix " + p, "DENIED"})
			}
			attacks = append(attacks,
				attack{"getent", `start=$(date +%s%N); getent hosts example.com; echo "getent=$? ms=$(( ($(date +%s%N) - start) / 1000000 ))"`, "getent=2"},
				attack{"python dns", py + " dns example.com", "BLOCKED"},
				attack{"raw", py + " raw", "BLOCKED"},
				attack{"raw6", py + " raw6", "BLOCKED"},
				attack{"packet", py + " packet", "BLOCKED"},
				attack{"attack raw", af.attack + " raw", "DENIED"},
				attack{"attack packet", af.attack + " packet", "DENIED"},
				attack{"vsock", py + " vsock", "BLOCKED"},
				attack{"netlink", py + " netlink", "BLOCKED"},
				attack{"mptcp", af.attack + " mptcp " + l.tcpPort, "DENIED"},
				attack{"sctp", af.attack + " sctp " + l.tcpPort, "DENIED"},
				attack{"routes", `{ tail -n +2 /proc/net/route; cat /proc/net/ipv6_route; } | grep -v ' lo$' | grep . || echo no-route`, "no-route"},
				attack{"interfaces", `ls /proc/sys/net/ipv4/conf`, ""},
				attack{"capabilities", `grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status`, ""},
				attack{"descriptors", "ls /proc/self/fd", ""},
			)
			bindWant := "BOUND" // in the command's own namespace, which nothing outside reaches
			if s.egressTCP {
				bindWant = "BLOCKED PermissionError"
			}
			attacks = append(attacks,
				attack{"bind 127.0.0.1:8080", py + " bind 127.0.0.1 8080", bindWant},
				attack{"bind ::1:8080", py + " bind ::1 8080", bindWant},
				attack{"bind the proxy's port", py + " bind 127.0.0.1 3128", "BLOCKED"})
			for _, a := range attacks {
				out, conns := runEgress(t, s, af.ws, a.script)
				out = strings.TrimSpace(out)
				t.Logf("%s: %s", a.name, out)
				if conns != 0 {
					t.Errorf("%s: %d connections reached the proxy", a.name, conns)
				}
				if strings.Contains(out, "REACHED") || strings.Contains(out, "ALLOWED") || strings.Contains(out, viaEgress) {
					t.Errorf("%s: got out: %s", a.name, out)
				}
				if a.want != "" && !strings.Contains(out, a.want) {
					t.Errorf("%s: %q, want %q in it", a.name, out, a.want)
				}
				if strings.HasPrefix(a.name, "curl ") && strings.Contains(out, "curl=0") {
					t.Errorf("%s: curl succeeded: %s", a.name, out)
				}
				switch a.name {
				case "getent":
					ms, _ := strconv.Atoi(out[strings.LastIndex(out, "ms=")+3:])
					if ms > 3000 {
						t.Errorf("getent took %d ms to fail: it must fail at once", ms)
					}
				case "interfaces":
					if f := strings.Fields(out); strings.Join(f, " ") != "all default lo" {
						t.Errorf("interfaces in the namespace: %q, want loopback only", out)
					}
				case "descriptors":
					if got := strings.Join(strings.Fields(out), " "); got != "0 1 2 3" {
						t.Errorf("open descriptors in the command (ls's own is 3): %q", out)
					}
				case "capabilities":
					for _, line := range strings.Split(out, "\n") {
						if f := strings.Fields(line); len(f) != 2 || strings.Trim(f[1], "0") != "" {
							t.Errorf("a capability reached the command: %s", line)
						}
					}
				}
			}
			// Give stray datagrams time to arrive before counting.
			time.Sleep(200 * time.Millisecond)
			if n := l.hits.Load() - before; n != 0 {
				t.Errorf("%d connections or datagrams reached the host's listeners", n)
			}
		})
	}
}

// TestEgressOptions: Egress and Network exclude each other; a sandbox
// without Egress gives its commands no listener; a key's folder keeps
// its sandbox's Egress.
func TestEgressOptions(t *testing.T) {
	af := newAttackFixture(t)
	if _, err := New(Options{Mode: None, Workspace: af.ws, Egress: true, Network: true}); err == nil {
		t.Error("Egress and Network were both accepted")
	}
	plain := newForTest(t, None, Options{Workspace: af.ws})
	t.Cleanup(plain.Close)
	tmp := tempFor(t, plain)
	path, args, _ := plain.Command(tmp, []string{"/bin/true"})
	c, err := plain.Start(exec.CommandContext(context.Background(), path, args...), tmp)
	if err != nil {
		t.Fatal(err)
	}
	if c.Egress() != nil || plain.Egress() {
		t.Error("a sandbox without Egress gave a command a listener")
	}
	c.Wait()

	if plain, err := New(Options{Mode: None, Workspace: af.ws, Egress: true}); err == nil {
		// A descriptor of the caller's own would take the number the
		// command line names where the command's first program makes
		// the namespace; elsewhere it is the command's.
		tmp := tempFor(t, plain)
		path, args, _ := plain.Command(tmp, []string{"/bin/true"})
		cmd := exec.CommandContext(context.Background(), path, args...)
		cmd.ExtraFiles = []*os.File{os.Stdin}
		c, err := plain.Start(cmd, tmp)
		switch {
		case plain.netinit != "" && err == nil:
			t.Error("a command with descriptors of its own was started with the hand-over's number taken")
			c.Wait()
		case plain.netinit == "" && err != nil:
			t.Errorf("a command with descriptors of its own: %v", err)
		case err == nil:
			c.Wait()
		}
		plain.Close()
	}

	// Where signals cannot be scoped (before Linux 6.12), a service that
	// is not root gives each command a PID namespace in a user namespace
	// of its own: the network namespace is made in the same one, and the
	// command's first program is the first process of that PID namespace.
	// As root, commands may run as another account.
	type variant struct {
		name string
		opts Options
	}
	variants := []variant{{"no-signal-scoping", Options{noScope: true}}}
	if os.Geteuid() == 0 {
		variants = append(variants, variant{"as-nobody", Options{User: &User{Name: "nobody", Uid: 65534, Gid: 65534}}})
	}
	for _, v := range variants {
		t.Run("landlock/"+v.name, func(t *testing.T) {
			af := newAttackFixture(t)
			if v.opts.User != nil && !egressExpected() {
				// A user namespace of the command's own cannot map the
				// account: refused, saying so.
				_, err := New(Options{Mode: Landlock, Workspace: af.ws, Egress: true, User: v.opts.User})
				if !errors.Is(err, ErrEgressUnavailable) || !strings.Contains(err.Error(), "another account") {
					t.Errorf("Egress with commands run as another account, without CAP_SYS_ADMIN: %v", err)
				}
				return
			}
			s := newEgress(t, Landlock, af, v.opts)
			t.Log(s.Describe())
			out, conns := runEgress(t, s, af.ws, "curl -s -m 10 -x http://"+EgressAddr+" http://example.invalid/ && echo && id -u && curl --noproxy '*' -s -m 5 http://127.0.0.1:1/; echo curl=$?")
			t.Logf("%q", out)
			if !strings.HasPrefix(out, viaEgress+"\n") || conns != 1 || strings.Contains(out, "curl=0") {
				t.Errorf("%q, %d connections to the proxy", out, conns)
			}
		})
	}

	for _, mode := range []Mode{Landlock, Bwrap} {
		t.Run(string(mode)+"/folder", func(t *testing.T) {
			af := newAttackFixture(t)
			s := newEgress(t, mode, af, Options{})
			dir := filepath.Join(af.ws, "tenant")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			f, err := s.For(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !f.Egress() {
				t.Fatal("the folder's sandbox lost Egress")
			}
			if out, conns := runEgress(t, f, dir, "curl -s -m 10 -x http://"+EgressAddr+" http://example.invalid/"); out != viaEgress || conns != 1 {
				t.Errorf("through the proxy from the folder: %q, %d connections", out, conns)
			}
			l := newListeners(t)
			if out, _ := runEgress(t, f, dir, "curl --noproxy '*' -s -m 5 http://127.0.0.1:"+l.tcpPort+"/; echo curl=$?"); strings.Contains(out, "curl=0") || l.hits.Load() != 0 {
				t.Errorf("the folder's command reached the host: %q, %d hits", out, l.hits.Load())
			}
		})
	}
}

// openFDs counts the test binary's open descriptors but those of
// control group folders: the control groups keep up to a few emptied
// groups, each with its folder open, for the next commands, as many as
// the timing of the last ones left.
func openFDs(t *testing.T) int {
	t.Helper()
	return len(fdList(t))
}

// fdList names the descriptors openFDs counts and what they are.
func fdList(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if !strings.HasPrefix(target, "/sys/fs/cgroup/") {
			out = append(out, e.Name()+" -> "+target)
		}
	}
	return out
}

// otherNetnsThreads counts the test binary's threads that are in a
// network namespace other than the process's: the launching threads of
// commands with Egress, and spares.
func otherNetnsThreads() int {
	self, _ := os.Readlink("/proc/self/ns/net")
	tasks, _ := os.ReadDir("/proc/self/task")
	n := 0
	for _, task := range tasks {
		if ns, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net"); err == nil && ns != self {
			n++
		}
	}
	return n
}

// eventually polls cond for up to 10 seconds.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestEgressNoLeaks: commands with Egress leave no descriptor, goroutine
// or thread behind: after a few runs the service holds what it held
// after the first (a spare, with its namespace and listener, where the
// sandbox makes them), and once the sandbox is closed no thread is left
// in a namespace of a command's.
func TestEgressNoLeaks(t *testing.T) {
	for _, mode := range egressModes {
		t.Run(string(mode), func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			af := newAttackFixture(t)
			s := newEgress(t, mode, af, Options{})
			run := func() {
				if out, conns := runEgress(t, s, af.ws, "curl -s -m 10 -x http://"+EgressAddr+" http://example.invalid/"); out != viaEgress || conns != 1 {
					t.Fatalf("through the proxy: %q, %d connections", out, conns)
				}
			}
			_, spares := s.FreshTemp()
			// A spare's thread is in a namespace of its own where threads
			// make them (not where each command's first program does).
			spareNS := 0
			if spares && s.netinit == "" {
				spareNS = 1
			}
			settled := func() bool {
				if !spares {
					return otherNetnsThreads() == 0
				}
				s.spareMu.Lock()
				defer s.spareMu.Unlock()
				return s.spare != nil && !s.warming && otherNetnsThreads() == spareNS
			}
			run()
			if !eventually(settled) {
				t.Fatalf("after one command: %d threads in other network namespaces", otherNetnsThreads())
			}
			fds, fdsBefore := openFDs(t), fdList(t)
			for range 5 {
				run()
			}
			if !eventually(settled) {
				t.Fatalf("after six commands: %d threads in other network namespaces", otherNetnsThreads())
			}
			// Not more than after the first: a descriptor each command
			// left would show five times over. (Fewer is no leak: the
			// first count can catch one of the proxy's connections still
			// closing.)
			if !eventually(func() bool { return openFDs(t) <= fds }) {
				t.Errorf("open descriptors: %d after one command, %d after six:\n%s\nthen:\n%s", fds, openFDs(t), strings.Join(fdList(t), "\n"), strings.Join(fdsBefore, "\n"))
			}
			s.Close()
			if !eventually(func() bool { return otherNetnsThreads() == 0 }) {
				t.Errorf("%d threads left in other network namespaces once the sandbox is closed", otherNetnsThreads())
			}
			if !eventually(func() bool { return runtime.NumGoroutine() <= goroutines }) {
				t.Errorf("goroutines: %d before, %d after", goroutines, runtime.NumGoroutine())
			}
		})
	}
}

// BenchmarkEgressStart measures what starting and waiting for a command
// (/bin/true) costs with and without Egress, from a spare and from a
// thread confined on the spot, serving the listener as a caller would.
func BenchmarkEgressStart(b *testing.B) {
	for _, mode := range egressModes {
		for _, egress := range []bool{false, true} {
			for _, spare := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/egress=%v/spare=%v", mode, egress, spare), func(b *testing.B) {
					ws := b.TempDir()
					s, err := New(Options{Mode: mode, Workspace: ws, Egress: egress})
					if err != nil {
						b.Skip(err)
					}
					defer s.Close()
					if _, fresh := s.FreshTemp(); spare && !fresh {
						b.Skip("no spares here: the sandbox does not make the commands' temporary folders")
					}
					if !spare {
						s.stopSpares()
					}
					for b.Loop() {
						tmp, fresh := s.FreshTemp()
						if !fresh {
							tmp = b.TempDir()
						}
						path, args, childTmp := s.Command(tmp, []string{"/bin/true"})
						cmd := exec.CommandContext(context.Background(), path, args...)
						cmd.Dir, cmd.Env = ws, egressEnv(ws, childTmp)
						cmd.Stdout = &bytes.Buffer{}
						c, err := s.StartContext(context.Background(), cmd, tmp)
						if err != nil {
							b.Fatal(err)
						}
						if ln := c.Egress(); ln != nil {
							serveEgress(ln)
						}
						if err, _ := c.Wait(); err != nil {
							b.Fatal(err)
						}
						if spare {
							// As between calls: the next spare is made
							// while none waits.
							b.StopTimer()
							waitSpare(s)
							b.StartTimer()
						}
					}
				})
			}
		}
	}
}

// BenchmarkEgressNamespace measures what a command's network namespace
// costs its launching thread (unshare, loopback up, the listener, and
// its close), against a thread that does nothing.
func BenchmarkEgressNamespace(b *testing.B) {
	if !egressExpected() {
		b.Skip("network namespaces need CAP_SYS_ADMIN")
	}
	for _, ns := range []bool{false, true} {
		b.Run(fmt.Sprintf("namespace=%v", ns), func(b *testing.B) {
			for b.Loop() {
				errc := make(chan error, 1)
				onDisposableThread(func() {
					if !ns {
						errc <- nil
						return
					}
					ln, err := enterEgressNamespace()
					if err == nil {
						ln.Close()
					}
					errc <- err
				})
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEgressNeedsNetinitRun: a binary that makes a sandbox with Egress
// where commands' first program makes their namespace (here as nobody),
// but whose main does not call netinit.Run, is refused by New with a
// message naming the fix, at once: its probe started the binary once,
// which refused in turn instead of starting itself again.
func TestEgressNeedsNetinitRun(t *testing.T) {
	if os.Getenv("TOOLSVC_TEST_AS_USER") != "" || os.Geteuid() != 0 {
		t.Skip("needs root to run the binary as nobody")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "nonetinit")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/nonetinit").CombinedOutput(); err != nil {
		t.Fatalf("building the helper: %v\n%s", err, out)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir, ws} {
		os.Chmod(d, 0o777)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin, ws)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + dir}
	out, err := cmd.CombinedOutput()
	t.Logf("in %v: %s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the helper failed: %v", err)
	}
	if !strings.Contains(string(out), "REFUSED: "+ErrEgressUnavailable.Error()) || !strings.Contains(string(out), "netinit.Run") {
		t.Errorf("New did not refuse naming netinit.Run: %s", out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v", d)
	}
}
