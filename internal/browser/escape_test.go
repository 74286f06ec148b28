package browser

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func (r *reports) handler(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 4096))
	r.mu.Lock()
	r.got = append(r.got, string(body))
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
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
// It reports what it managed to /report on its own site.
func webrtcPage(name string, udpPort, tcpPort int, crossSite string) string {
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
</script></body></html>`, udpPort, tcpPort, name, crossSite)
}

func TestWebRTCCannotEscape(t *testing.T) {
	needChrome(t)
	udp := newUDPSink(t, "127.0.0.1:0")
	tcp := newTCPSink(t, "127.0.0.2:0")
	rep := &reports{ch: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	var frameURL string // the same site by a name: another site to the browser
	mux.HandleFunc("/webrtc", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, webrtcPage("page", udp.port, tcp.port, frameURL))
	})
	mux.HandleFunc("/webrtc-frame", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, webrtcPage("cross-site iframe", udp.port, tcp.port, ""))
	})
	mux.HandleFunc("/report", rep.handler)
	site := httptest.NewServer(mux)
	defer site.Close()
	frameURL = "http://allowed.test:" + site.URL[strings.LastIndex(site.URL, ":")+1:] + "/webrtc-frame"

	t.Run("guarded browser", func(t *testing.T) {
		b := newBrowser(t, 1)
		shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site.URL + "/webrtc", Width: 320, Height: 240, Wait: 3 * time.Second})
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
		opts := []chromedp.ExecAllocatorOption{chromedp.Headless, chromedp.Flag("no-first-run", true)}
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
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/webrtc")); err != nil {
			t.Fatal(err)
		}
		waitReports(t, rep, 3)
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
		rep.mu.Lock()
		got := len(rep.got)
		rep.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-rep.ch:
		case <-timeout:
			t.Fatalf("%d of %d reports came: a page's script did not run. They said:\n%s", got, n, rep.all())
		}
	}
}
