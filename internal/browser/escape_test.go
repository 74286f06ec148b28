package browser

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// The tests here try the ways a page could send packets past the proxy.
// Each listener counts what reaches it; the counts must stay zero.

// udpSink is a UDP listener that counts the datagrams it receives.
type udpSink struct {
	conn    net.PacketConn
	packets atomic.Int64
	port    int
}

func newUDPSink(t testing.TB, addr string) *udpSink {
	t.Helper()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Skipf("cannot listen on udp %s: %v", addr, err)
	}
	s := &udpSink{conn: c, port: c.LocalAddr().(*net.UDPAddr).Port}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			s.packets.Add(1)
		}
	}()
	t.Cleanup(func() { c.Close() })
	return s
}

// tcpSink is a TCP listener that counts the connections it accepts.
type tcpSink struct {
	accepts atomic.Int64
	port    int
}

func newTCPSink(t testing.TB, addr string) *tcpSink {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on tcp %s: %v", addr, err)
	}
	s := &tcpSink{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

// reports collects what test pages post to /report, so a test knows the
// page's script ran and what it could do.
type reports struct {
	mu      sync.Mutex
	got     []string
	changed chan struct{} // closed and replaced at each report
}

func newReports() *reports { return &reports{changed: make(chan struct{})} }

func (r *reports) handler(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 4096))
	r.mu.Lock()
	r.got = append(r.got, string(body))
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// count returns how many reports have come, and a channel that closes at
// the next.
func (r *reports) count() (int, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got), r.changed
}

// gate answers (with an empty image) only when n reports have come, or the
// request ends. A page that loads /gate?n=... finishes loading after its
// reports, so a capture, which waits for the load, sees them all without a
// timed wait.
func (r *reports) gate(w http.ResponseWriter, req *http.Request) {
	n := 1
	fmt.Sscan(req.URL.Query().Get("n"), &n)
	for {
		got, changed := r.count()
		if got >= n {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		select {
		case <-changed:
		case <-req.Context().Done():
			return
		}
	}
}

func (r *reports) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, "\n")
}

// webrtcPage tries every way WebRTC has to send packets: STUN and TURN over
// UDP to a loopback listener (an address the guard even allows, since UDP
// never reaches the guard), and TURN over TCP to a forbidden address; from
// the page, from a fresh about:blank iframe and a srcdoc one, and, when
// name is "page", from a cross-site iframe, which has a process of its own.
// It reports what it managed to /report on its own site, 800 ms after it
// started, time enough for the control run's first packets. With gate > 0
// its load waits until gate reports have come in all.
func webrtcPage(name string, udpPort, tcpPort int, crossSite string, gate int) string {
	return fmt.Sprintf(`<!doctype html><html><body style="margin:0;background:#ff0000"><script>
var log = [];
function attempt(name, PC) {
  if (typeof PC !== "function") { log.push(name + ": no RTCPeerConnection"); return; }
  try {
    var pc = new PC({iceServers: [
      {urls: "stun:127.0.0.1:%[1]d"},
      {urls: "turn:127.0.0.1:%[1]d?transport=udp", username: "u", credential: "p"},
      {urls: "turn:127.0.0.2:%[2]d?transport=tcp", username: "u", credential: "p"}]});
    pc.createDataChannel("x");
    pc.onicecandidate = function (e) { if (e.candidate) log.push(name + " candidate: " + e.candidate.candidate); };
    pc.createOffer().then(function (d) { return pc.setLocalDescription(d); }).catch(function (e) { log.push(name + ": " + e); });
    log.push(name + ": created");
  } catch (e) { log.push(name + ": " + e); }
}
attempt("%[3]s", window.RTCPeerConnection);
attempt("%[3]s webkit", window.webkitRTCPeerConnection);
var f = document.createElement("iframe");
document.body.appendChild(f);
try { attempt("%[3]s about:blank iframe", f.contentWindow.RTCPeerConnection); } catch (e) { log.push("iframe: " + e); }
var g = document.createElement("iframe");
g.srcdoc = "<script>parent.attempt('%[3]s srcdoc iframe', window.RTCPeerConnection)<\/script>";
document.body.appendChild(g);
if ("%[4]s") { var h = document.createElement("iframe"); h.src = "%[4]s"; document.body.appendChild(h); }
setTimeout(function () { fetch("/report", {method: "POST", body: log.join("\n")}); }, 800);
</script>%[5]s</body></html>`, udpPort, tcpPort, name, crossSite, gateImg(gate))
}

func gateImg(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(`<img src="/gate?n=%d">`, n)
}

// TestWebRTCCannotEscape loads the WebRTC page in the service's browser and
// counts what reaches a UDP listener on 127.0.0.1 (STUN, UDP TURN) and a TCP
// listener on 127.0.0.2 (TCP TURN): nothing may. A control run in a plain
// Chromium shows the page does send packets when nothing stops it.
func TestWebRTCCannotEscape(t *testing.T) {
	needChrome(t)
	udp := newUDPSink(t, "127.0.0.1:0")
	tcp := newTCPSink(t, "127.0.0.2:0")
	rep := newReports()
	mux := http.NewServeMux()
	var frameURL string // the same site by a name: another site to the browser
	// /webrtc is the guarded browser's page (with the cross-site iframe;
	// its load waits for both reports), /webrtc-control the control's.
	mux.HandleFunc("/webrtc", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, webrtcPage("page", udp.port, tcp.port, frameURL, 2))
	})
	mux.HandleFunc("/webrtc-frame", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, webrtcPage("cross-site iframe", udp.port, tcp.port, "", 0))
	})
	mux.HandleFunc("/webrtc-control", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, webrtcPage("control", udp.port, tcp.port, "", 3))
	})
	mux.HandleFunc("/report", rep.handler)
	mux.HandleFunc("/gate", rep.gate)
	site := httptest.NewServer(mux)
	defer site.Close()
	frameURL = "http://allowed.test:" + site.URL[strings.LastIndex(site.URL, ":")+1:] + "/webrtc-frame"

	t.Run("guarded browser", func(t *testing.T) {
		b := newBrowser(t, 1)
		shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site.URL + "/webrtc", Width: 320, Height: 240})
		if err != nil {
			t.Fatal(err)
		}
		wantColour(t, decode(t, shot.PNG), 5, 5, red)
		waitReports(t, rep, 2)
		said := rep.all()
		t.Logf("the pages reported:\n%s", said)
		// The script run on every new document of the tab removes WebRTC
		// from the page and its same-process frames...
		for _, want := range []string{"page: no RTCPeerConnection", "page webkit: no RTCPeerConnection", "page about:blank iframe: no RTCPeerConnection", "page srcdoc iframe: no RTCPeerConnection"} {
			if !strings.Contains(said, want) {
				t.Errorf("the report lacks %q", want)
			}
		}
		// ...but not from a cross-site iframe: there a peer connection is
		// made, and the switch alone must keep it from sending.
		if !strings.Contains(said, "cross-site iframe: created") {
			t.Errorf("the cross-site iframe made no peer connection, so the switch went untested")
		}
		if n := udp.packets.Load(); n != 0 {
			t.Errorf("the UDP listener received %d packets from the page's WebRTC", n)
		}
		if n := tcp.accepts.Load(); n != 0 {
			t.Errorf("the forbidden TCP listener accepted %d connections from the page's WebRTC", n)
		}
		if strings.Contains(said, "candidate:") {
			t.Errorf("WebRTC gathered candidates:\n%s", said)
		}
	})

	// The control: the same page in a Chromium without the protections does
	// reach the UDP listener, so the zero above means something.
	t.Run("control: unprotected browser", func(t *testing.T) {
		opts := []chromedp.ExecAllocatorOption{chromedp.Headless, chromedp.Flag("no-first-run", true),
			chromedp.Flag("disable-breakpad", true), chromedp.Flag("disable-crash-reporter", true)}
		if p := os.Getenv("TOOLSVC_CHROME_PATH"); p != "" {
			opts = append(opts, chromedp.ExecPath(p))
		}
		if os.Geteuid() == 0 {
			opts = append(opts, chromedp.NoSandbox)
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		defer acancel()
		ctx, cancel := chromedp.NewContext(actx)
		defer cancel()
		ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		before := udp.packets.Load()
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/webrtc-control")); err != nil {
			t.Fatal(err)
		}
		waitReports(t, rep, 3)
		// The packets may trail the report on a busy machine: give them
		// time, the check is only that some come.
		for i := 0; i < 300 && udp.packets.Load() == before; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if udp.packets.Load() == before {
			t.Fatalf("the test page sent no UDP packet even without protections; the check above proves nothing. The page reported:\n%s", rep.all())
		}
	})
}

// waitReports waits until n reports have come in all.
func waitReports(t *testing.T, rep *reports, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		got, changed := rep.count()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d of %d reports came: a page's script did not run. They said:\n%s", got, n, rep.all())
		}
	}
}

// wsAccept is the Sec-WebSocket-Accept answer to key (RFC 6455).
func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsHello is a WebSocket server that sends "hello" and waits for the
// client to close.
func wsHello(w http.ResponseWriter, r *http.Request) {
	c, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(r.Header.Get("Sec-WebSocket-Key")))
	buf.Write([]byte{0x81, 5, 'h', 'e', 'l', 'l', 'o'})
	buf.Flush()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.Copy(io.Discard, buf)
}

// TestPageCannotRouteAround loads a page that tries every other way out:
// WebSockets (ws and wss), fetch, iframes, a redirect, a service worker,
// EventSource, and prefetch and preconnect hints. Every target is a listener
// on 127.0.0.2, refused by the guard, reached by address or by a name of its
// own that only the guard's resolver knows; the listener counts TCP
// connections of any kind and must count none. Each name must show up in the
// proxy's refusals, so each way was judged by the guard and not merely
// unable to resolve. A WebSocket to a name only the guard's resolver knows
// does open, so WebSockets do use the proxy.
func TestPageCannotRouteAround(t *testing.T) {
	needChrome(t)
	sink := newTCPSink(t, "127.0.0.2:0")
	names := []string{"ws", "wss", "fetch", "frame", "redirect", "sw", "sse", "hint"}
	resolve := stubResolver{"allowed.test": "127.0.0.1"}
	for _, n := range names {
		resolve["evil-"+n+".test"] = "127.0.0.2"
	}
	g, err := netguard.New(netguard.Options{AllowCIDRs: []string{"127.0.0.1/32"}, AllowHosts: []string{"allowed.test"}, Resolver: resolve})
	if err != nil {
		t.Fatal(err)
	}
	evil := func(name string) string { return fmt.Sprintf("evil-%s.test:%d", name, sink.port) }
	lit := fmt.Sprintf("127.0.0.2:%d", sink.port)

	rep := newReports()
	mux := http.NewServeMux()
	mux.HandleFunc("/report", rep.handler)
	mux.HandleFunc("/gate", rep.gate)
	mux.HandleFunc("/echo", wsHello)
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+evil("redirect")+"/hop", http.StatusFound)
	})
	mux.HandleFunc("/sw.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `self.addEventListener("install", function (e) {
  e.waitUntil(Promise.all([fetch("http://%s/sw").catch(function () {}), fetch("http://%s/sw").catch(function () {})]));
});`, evil("sw"), lit)
	})
	var sitePort string
	mux.HandleFunc("/attack", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head>
<link rel="preconnect" href="http://%[1]s"><link rel="dns-prefetch" href="//%[1]s"><link rel="prefetch" href="http://%[1]s/prefetch">
</head><body style="margin:0;background:#ff0000">
<iframe src="http://%[2]s/frame"></iframe><iframe src="http://%[3]s/frame"></iframe><iframe src="/hop"></iframe>
<script>
// Each attempt settles when it has an outcome; the page reports when all
// have, and its load waits for that (the /gate image).
var log = [], tries = [];
function ws(name, url) {
  tries.push(new Promise(function (done) {
    try {
      var s = new WebSocket(url);
      s.onmessage = function (e) { log.push(name + ": message " + e.data); s.close(); done(); };
      s.onerror = function () { log.push(name + ": error"); done(); };
      s.onclose = function () { done(); };
    } catch (e) { log.push(name + ": " + e); done(); }
  }));
}
function get(name, url) {
  tries.push(fetch(url, {mode: "no-cors"}).then(function () { log.push(name + ": answered"); }, function (e) { log.push(name + ": " + e); }));
}
ws("ws allowed by name", "ws://allowed.test:%[4]s/echo");
ws("ws by name", "ws://%[5]s/");
ws("ws by address", "ws://%[3]s/");
ws("wss by name", "wss://%[6]s/");
get("fetch by name", "http://%[7]s/fetch");
get("fetch by address", "http://%[3]s/fetch");
get("fetch redirected", "/hop");
tries.push(new Promise(function (done) {
  var es = new EventSource("http://%[8]s/sse");
  es.onerror = function () { log.push("eventsource: error"); es.close(); done(); };
}));
tries.push(!navigator.serviceWorker ? (log.push("service worker: not available"), null) :
  navigator.serviceWorker.register("/sw.js").then(function (reg) {
    var w = reg.installing || reg.waiting || reg.active;
    log.push("service worker: registered");
    return new Promise(function (done) {
      if (!w || w.state !== "installing") { done(); return; }
      w.onstatechange = function () { if (w.state !== "installing") { log.push("service worker: " + w.state); done(); } };
    });
  }, function (e) { log.push("service worker: " + e); }));
Promise.all(tries).then(function () { return fetch("/report", {method: "POST", body: log.join("\n")}); });
</script><img src="/gate?n=1"></body></html>`, evil("hint"), evil("frame"), lit, sitePort, evil("ws"), evil("wss"), evil("fetch"), evil("sse"))
	})
	site := httptest.NewServer(mux)
	defer site.Close()
	_, sitePort, _ = net.SplitHostPort(site.Listener.Addr().String())

	b := New(Options{ExecPath: os.Getenv("TOOLSVC_CHROME_PATH"), MaxPages: 1, Guard: g, Log: zerolog.Nop()})
	defer b.Close()
	start := time.Now()
	shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site.URL + "/attack", Width: 320, Height: 240})
	if err != nil {
		t.Fatal(err)
	}
	waitReports(t, rep, 1)
	said := rep.all()
	t.Logf("the page reported:\n%s", said)
	t.Logf("blocked (%d): %q", shot.NBlocked, shot.Blocked)
	if !strings.Contains(said, "ws allowed by name: message hello") {
		t.Errorf("the WebSocket to a name only the proxy can resolve did not open, so WebSockets do not go through the proxy as assumed")
	}
	// The prefetch hint (evil-hint.test) is left out: Chromium may send it
	// after the load, or not at all.
	for _, n := range []string{"ws", "wss", "fetch", "frame", "redirect", "sw", "sse"} {
		if r, ok := b.proxy.Refused("evil-"+n+".test", start); !ok || !r.Denied {
			t.Errorf("no refusal by the guard recorded for the %s attempt (evil-%s.test)", n, n)
		}
	}
	if _, ok := b.proxy.Refused("127.0.0.2", start); !ok {
		t.Errorf("no refusal recorded for 127.0.0.2")
	}
	for _, r := range b.proxy.RefusedSince(start) {
		t.Logf("refused: %s", r.Host)
	}
	if len(shot.Blocked) == 0 {
		t.Errorf("the result lists no blocked request")
	}

	// After the page, every IP socket the browser's processes hold is a TCP
	// connection to the proxy: no listening port (DevTools runs over a
	// pipe), no UDP socket, no raw one, no connection anywhere else.
	t.Run("the browser's only sockets go to the proxy", func(t *testing.T) {
		pids := browserTree(t, b)
		inodes := socketInodes(pids)
		if len(inodes) == 0 {
			t.Fatalf("the browser's %d processes hold no socket at all; the check would prove nothing", len(pids))
		}
		_, port, _ := net.SplitHostPort(b.proxy.Addr())
		var p int
		fmt.Sscan(port, &p)
		proxy := fmt.Sprintf("0100007F:%04X", p)
		ip := inetSockets(inodes, []string{"/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6", "/proc/net/raw", "/proc/net/raw6"})
		for _, sock := range ip {
			f := strings.Fields(sock) // table local remote state
			if f[0] != "/proc/net/tcp" || f[2] != proxy || f[3] == "0A" {
				t.Errorf("the browser holds a socket that is not a connection to the proxy (%s): %s", proxy, sock)
			}
		}
		t.Logf("the browser's %d processes hold %d sockets; the IP ones: %v", len(pids), len(inodes), ip)
	})

	if n := sink.accepts.Load(); n != 0 {
		t.Fatalf("the forbidden listener on 127.0.0.2 accepted %d connections", n)
	}
}

// browserTree returns the pids of the running browser process and of all
// its descendants.
func browserTree(t *testing.T, b *Browser) []string {
	t.Helper()
	b.mu.Lock()
	ctx := b.ctx
	b.mu.Unlock()
	c := chromedp.FromContext(ctx)
	if ctx == nil || c == nil || c.Browser == nil || c.Browser.Process() == nil {
		t.Fatal("no browser running")
	}
	parent := map[string]string{} // pid -> ppid
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(st, ')'); i > 0 {
			if f := strings.Fields(string(st[i+1:])); len(f) > 1 {
				parent[e.Name()] = f[1]
			}
		}
	}
	tree := []string{fmt.Sprint(c.Browser.Process().Pid)}
	for i := 0; i < len(tree); i++ {
		for pid, pp := range parent {
			if pp == tree[i] {
				tree = append(tree, pid)
			}
		}
	}
	return tree
}

// socketInodes returns the inodes of the sockets held by the processes.
func socketInodes(pids []string) map[string]bool {
	inodes := map[string]bool{}
	for _, pid := range pids {
		fds, _ := os.ReadDir("/proc/" + pid + "/fd")
		for _, fd := range fds {
			link, err := os.Readlink("/proc/" + pid + "/fd/" + fd.Name())
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
			}
		}
	}
	return inodes
}

// inetSockets returns the IP sockets of the given /proc/net tables whose
// inode is in inodes and whose state is in states (hex, as in the tables;
// empty: any), as "table local-address remote-address state".
func inetSockets(inodes map[string]bool, tables []string, states ...string) []string {
	var out []string
	for _, table := range tables {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) <= 9 || !inodes[f[9]] || (len(states) > 0 && !slices.Contains(states, f[3])) {
				continue
			}
			out = append(out, table+" "+f[1]+" "+f[2]+" "+f[3])
		}
	}
	return out
}

// TestSiteNeverGetsTheSecret: a site that asks for credentials, as a server
// (401) or posing as a proxy (407), gets no answer with the proxy's secret,
// and the capture does not hang on the prompt.
func TestSiteNeverGetsTheSecret(t *testing.T) {
	needChrome(t)
	var mu sync.Mutex
	var seen []string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for k, v := range r.Header {
			seen = append(seen, k+": "+strings.Join(v, ","))
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/401":
			w.Header().Set("WWW-Authenticate", `Basic realm="site"`)
			w.WriteHeader(http.StatusUnauthorized)
		case "/407":
			w.Header().Set("Proxy-Authenticate", `Basic realm="site"`)
			w.WriteHeader(http.StatusProxyAuthRequired)
		}
		fmt.Fprint(w, `<body style="margin:0;background:#ff0000"></body>`)
	}))
	defer site.Close()
	b := newBrowser(t, 1)
	for _, path := range []string{"/401", "/407"} {
		t.Run(path, func(t *testing.T) {
			shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site.URL + path, Width: 320, Height: 240})
			t.Logf("shot %v, err %v", shot != nil, err)
			if err != nil && toolerr.ErrorCode(err) == toolerr.Timeout {
				t.Fatalf("the capture hung on the prompt: %v", err)
			}
		})
	}
	_, pass := b.proxy.Credentials()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the site saw no request")
	}
	for _, h := range seen {
		lh := strings.ToLower(h)
		if strings.HasPrefix(lh, "authorization:") || strings.HasPrefix(lh, "proxy-authorization:") || strings.Contains(h, pass) || strings.Contains(h, base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+pass))) {
			t.Errorf("the site received %q", h)
		}
	}
}
