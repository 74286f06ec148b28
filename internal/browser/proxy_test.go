package browser

import (
	"bufio"
	"encoding/base64"
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
		if v := r.Header.Get("Proxy-Authorization"); v != "" {
			fmt.Fprint(w, "the proxy credentials reached the site: "+v)
			return
		}
		fmt.Fprint(w, "hello "+r.URL.Path)
	}))
	defer site.Close()
	_, sitePort, _ := net.SplitHostPort(site.Listener.Addr().String())

	p, err := StartProxy(testGuard(t), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	user, pass := p.Credentials()
	proxyURL := &url.URL{Scheme: "http", Host: p.Addr(), User: url.UserPassword(user, pass)}
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
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, basic(user, pass))
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
		req, _ := http.NewRequest("GET", "http://"+p.Addr()+"/", nil)
		req.Header.Set("Proxy-Authorization", "Basic "+basic(user, pass))
		resp, err := http.DefaultClient.Do(req)
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

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// TestProxyNeedsTheSecret plays another local process that found the
// proxy's port: without the credentials, or with wrong ones, every kind of
// request gets 407 and the target, an address the guard allows, sees no
// connection at all.
func TestProxyNeedsTheSecret(t *testing.T) {
	target := newTCPSink(t, "127.0.0.1:0") // allowed by the test guard
	tgt := fmt.Sprintf("127.0.0.1:%d", target.port)
	p, err := StartProxy(testGuard(t), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	user, pass := p.Credentials()
	if len(pass) < 20 {
		t.Fatalf("the secret %q is too short", pass)
	}
	if q, err := StartProxy(testGuard(t), zerolog.Nop()); err != nil {
		t.Fatal(err)
	} else {
		_, pass2 := q.Credentials()
		q.Close()
		if pass2 == pass {
			t.Fatal("two proxies made the same secret")
		}
	}

	for _, auth := range []struct{ name, header string }{
		{"no credentials", ""},
		{"wrong password", "Basic " + basic(user, pass[:len(pass)-1]+"x")},
		{"wrong user", "Basic " + basic("root", pass)},
		{"password alone", "Basic " + basic("", pass)},
		{"not basic", "Bearer " + pass},
		{"not base64", "Basic " + user + ":" + pass},
		{"empty basic", "Basic "},
	} {
		for _, req := range []struct{ name, text string }{
			{"CONNECT", "CONNECT " + tgt + " HTTP/1.1\r\nHost: " + tgt + "\r\n"},
			{"GET", "GET http://" + tgt + "/ HTTP/1.1\r\nHost: " + tgt + "\r\n"},
			{"direct", "GET / HTTP/1.1\r\nHost: " + p.Addr() + "\r\n"},
		} {
			t.Run(auth.name+"/"+req.name, func(t *testing.T) {
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				text := req.text
				if auth.header != "" {
					text += "Proxy-Authorization: " + auth.header + "\r\n"
				}
				io.WriteString(c, text+"\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusProxyAuthRequired {
					t.Errorf("status %d, want 407", resp.StatusCode)
				}
				if !strings.HasPrefix(resp.Header.Get("Proxy-Authenticate"), "Basic ") {
					t.Errorf("Proxy-Authenticate %q", resp.Header.Get("Proxy-Authenticate"))
				}
			})
		}
	}

	// With the credentials the same CONNECT goes through, so the refusals
	// above are the secret's doing. The target closes what it accepts, so
	// the tunnel's end means it has counted this connection, and every
	// earlier one, since it accepts in order.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", tgt, tgt, basic(user, pass))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT with the credentials: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, br)
	if n := target.accepts.Load(); n != 1 {
		t.Fatalf("the target accepted %d connections, want exactly the one with the credentials", n)
	}
}
