package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMaxConns: a connection over MaxConns is answered 503 with the
// reason, and served again once a slot is free.
func TestMaxConns(t *testing.T) {
	echo := newEchoServer(t, "tcp", "127.0.0.1:0")
	port := strconv.Itoa(echo.Addr().(*net.TCPAddr).Port)
	r := newRig(t, rigConfig{allow: []string{"echo.test:*"}, guard: openGuard(), opts: Options{MaxConns: 2}})
	first, _ := r.connect(t, "echo.test:"+port)
	r.connect(t, "echo.test:"+port)
	resp, _, _ := r.raw(t, "CONNECT echo.test:"+port+" HTTP/1.1\r\n\r\n")
	wantRefused(t, resp, http.StatusServiceUnavailable, "refused: echo.test:"+port+" (too many connections through the proxy at once (the limit is 2)")
	if ref := r.lastRefusal(t); ref.Host != "echo.test" || ref.Status != http.StatusServiceUnavailable {
		t.Errorf("OnRefusal got %+v", ref)
	}
	first.Close()
	waitFor(t, "a free slot", func() bool {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			return false
		}
		defer c.Close()
		io.WriteString(c, "CONNECT echo.test:"+port+" HTTP/1.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

// TestHeaderLimit: a request head over MaxHeaderBytes is answered 431; one
// under it but over the small reader a connection starts with goes
// through whole, with the request pipelined after it.
func TestHeaderLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path+" "+strconv.Itoa(len(r.Header.Get("X-Big"))))
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard(), opts: Options{MaxHeaderBytes: 16 << 10}})
	r.redirect("mirror.test", 80, srv.Listener.Addr().String())
	big := "GET http://mirror.test/big HTTP/1.1\r\nHost: mirror.test\r\nX-Big: " + strings.Repeat("a", 10000) + "\r\n\r\n"
	resp, _, br := r.raw(t, big+"GET http://mirror.test/next HTTP/1.1\r\nHost: mirror.test\r\n\r\n")
	for _, want := range []string{"/big 10000", "/next 0"} {
		body, _ := io.ReadAll(resp.Body)
		if string(body) != want {
			t.Errorf("got %q, want %q", body, want)
		}
		if want == "/big 10000" {
			var err error
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp, _, _ = r.raw(t, "GET http://mirror.test/ HTTP/1.1\r\nHost: mirror.test\r\nX-Big: "+strings.Repeat("a", 20000)+"\r\n\r\n")
	wantRefused(t, resp, http.StatusRequestHeaderFieldsTooLarge, "the request head is over 16384 bytes")
}

// TestHeaderTimeout: a client that does not finish its request head in
// HeaderTimeout is dropped.
func TestHeaderTimeout(t *testing.T) {
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard(), opts: Options{HeaderTimeout: 200 * time.Millisecond}})
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://mirror.test/ HTTP/1.1\r\nHost: mirr")
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes, want the connection closed", n)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("dropped after %v", d)
	}
}

// TestIdleTimeout: a tunnel where nothing moves either way for
// IdleTimeout is closed; one where bytes keep coming one way only is not.
func TestIdleTimeout(t *testing.T) {
	drip, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer drip.Close()
	go func() { // a byte every 25 ms, 40 in all (twice IdleTimeout), then the end
		for {
			c, err := drip.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for range 40 {
					if _, err := c.Write([]byte{'.'}); err != nil {
						return
					}
					time.Sleep(25 * time.Millisecond)
				}
			}()
		}
	}()
	echo := newEchoServer(t, "tcp", "127.0.0.1:0")
	r := newRig(t, rigConfig{allow: []string{"echo.test:*"}, guard: openGuard(), opts: Options{IdleTimeout: 500 * time.Millisecond}})

	conn, br := r.connect(t, "echo.test:"+strconv.Itoa(drip.Addr().(*net.TCPAddr).Port))
	got, err := io.ReadAll(br)
	if len(got) != 40 {
		t.Errorf("a tunnel busy one way only got %d of 40 bytes (%v)", len(got), err)
	}
	conn.Close()

	conn, br = r.connect(t, "echo.test:"+strconv.Itoa(echo.Addr().(*net.TCPAddr).Port))
	io.WriteString(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("an idle tunnel: %v, want EOF", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 4*time.Second {
		t.Errorf("an idle tunnel was closed after %v, want about 500ms", d)
	}
}

// TestCloseLeavesNothing: Close ends tunnels, requests under way, idle
// client connections and tunnels waiting for their ClientHello, Serve
// returns ErrClosed, and no goroutine of the proxy remains.
func TestCloseLeavesNothing(t *testing.T) {
	echo := newEchoServer(t, "tcp", "127.0.0.1:0")
	echoPort := strconv.Itoa(echo.Addr().(*net.TCPAddr).Port)
	entered := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
	}))
	defer slow.Close()
	tls := newCountingServer(t)
	runtime.GC()
	before := runtime.NumGoroutine()

	r := newRig(t, rigConfig{allow: []string{"echo.test:*", "mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, slow.Listener.Addr().String())
	r.redirect("mirror.test", 443, tls.addr())
	var conns []net.Conn
	for range 3 {
		c, _ := r.connect(t, "echo.test:"+echoPort)
		conns = append(conns, c)
	}
	hello, _ := r.connect(t, "mirror.test:443") // waits for a ClientHello
	conns = append(conns, hello)
	idle, err := net.Dial("tcp", r.addr) // sends nothing
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, idle)
	client := r.client(t, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	var reqErr error
	go func() {
		defer wg.Done()
		resp, err := client.Get("http://mirror.test/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		reqErr = err
	}()
	<-entered

	closed := make(chan struct{})
	go func() { r.proxy.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	wg.Wait()
	if reqErr == nil {
		t.Error("the request under way succeeded after Close")
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a client connection is still open after Close")
		}
		c.Close()
	}
	if err := r.proxy.Serve(newListener(t)); err != ErrClosed {
		t.Errorf("Serve after Close: %v", err)
	}
	client.Transport.(*http.Transport).CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		var dump strings.Builder
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, dump.String())
	}
}

func newListener(t *testing.T) net.Listener {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}
