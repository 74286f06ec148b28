package browser

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestProxy drives the guarded proxy as a browser would, without a
// browser: plain http forwarded, CONNECT tunnels, and refusals by literal
// address, by a name resolving to a forbidden address, and by scheme.
func TestProxy(t *testing.T) {
	bad := newForbidden(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello "+r.URL.Path)
	}))
	defer site.Close()
	_, sitePort, _ := net.SplitHostPort(site.Listener.Addr().String())

	p, err := StartProxy(testGuard(t), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	proxyURL, _ := url.Parse("http://" + p.Addr())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 10 * time.Second}

	t.Run("http forwarded", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1", "allowed.test"} {
			resp, err := client.Get("http://" + host + ":" + sitePort + "/page")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "hello /page" {
				t.Errorf("%s: %d %q", host, resp.StatusCode, body)
			}
		}
	})

	t.Run("http refused", func(t *testing.T) {
		for _, u := range []string{
			"http://127.0.0.2:" + bad.port + "/", // literal, refused by the URL check
			"http://evil.test:" + bad.port + "/", // name, refused at dial time
			"http://0x7f000002:" + bad.port + "/",
		} {
			resp, err := client.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(headerDenied) == "" {
				t.Errorf("%s: status %d, denied header %q", u, resp.StatusCode, resp.Header.Get(headerDenied))
			}
		}
		if r, ok := p.Refused("evil.test", time.Now().Add(-time.Minute)); !ok || !r.Denied {
			t.Errorf("refusal of evil.test not recorded: %+v", r)
		}
	})

	connect := func(t *testing.T, target string) (int, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, c
	}

	t.Run("connect tunnel", func(t *testing.T) {
		status, c := connect(t, "127.0.0.1:"+sitePort)
		defer c.Close()
		if status != 200 {
			t.Fatalf("CONNECT to the allowed site: %d", status)
		}
		fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "hello /tunnel" {
			t.Errorf("through the tunnel: %q", body)
		}
	})

	t.Run("connect refused", func(t *testing.T) {
		for _, target := range []string{"127.0.0.2:" + bad.port, "evil.test:" + bad.port, "169.254.169.254:443", "[::1]:" + bad.port} {
			status, c := connect(t, target)
			c.Close()
			if status != http.StatusForbidden {
				t.Errorf("CONNECT %s: %d, want 403", target, status)
			}
		}
	})

	t.Run("not a proxy request", func(t *testing.T) {
		resp, err := http.Get("http://" + p.Addr() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("direct request: %d, want 400", resp.StatusCode)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		resp, err := client.Get("http://nosuch.test/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(resp.Header.Get(headerUnreachable), "nosuch.test") {
			t.Errorf("unknown host: %d %q", resp.StatusCode, resp.Header.Get(headerUnreachable))
		}
	})

	if n := bad.hits.Load(); n != 0 {
		t.Fatalf("the forbidden server was reached %d times", n)
	}
}
