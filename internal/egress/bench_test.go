package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkConnectRoundTrip: one whole tunnel per operation, as a client
// opening a connection per request would: connect to the proxy, CONNECT
// (rules, resolution and guard, dial), 200, four bytes there and back,
// close.
func BenchmarkConnectRoundTrip(b *testing.B) {
	echo := newEchoServer(b, "tcp", "127.0.0.1:0")
	authority := "echo.test:" + strconv.Itoa(echo.Addr().(*net.TCPAddr).Port)
	r := newRig(b, rigConfig{allow: []string{"*.npmjs.org", "pypi.org", "echo.test:*"}, guard: openGuard()})
	request := []byte("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n")
	buf := make([]byte, 4)
	b.ReportAllocs()
	for b.Loop() {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			b.Fatal(err)
		}
		c.Write(request)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatal(err, resp)
		}
		c.Write([]byte("ping"))
		if _, err := io.ReadFull(br, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkTunnelRoundTrip: 64 bytes there and back through a tunnel that
// is already open: the cost the proxy adds to each exchange.
func BenchmarkTunnelRoundTrip(b *testing.B) {
	echo := newEchoServer(b, "tcp", "127.0.0.1:0")
	r := newRig(b, rigConfig{allow: []string{"echo.test:*"}, guard: openGuard()})
	c, br := r.connect(b, "echo.test:"+strconv.Itoa(echo.Addr().(*net.TCPAddr).Port))
	msg := make([]byte, 64)
	got := make([]byte, 64)
	b.SetBytes(2 * int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		c.Write(msg)
		if _, err := io.ReadFull(br, got); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainHTTP: a plain HTTP GET through the proxy on a kept-alive
// connection, as npm or pip would send to an http:// mirror.
func BenchmarkPlainHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	b.Cleanup(srv.Close)
	r := newRig(b, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, srv.Listener.Addr().String())
	client := r.client(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get("http://mirror.test/")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
