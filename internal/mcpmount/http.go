package mcpmount

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectHTTP opens a session with a Streamable HTTP server. The URL is
// the operator's, so it is not checked by netguard (a loopback or private
// address is allowed), but a redirect to another host is refused, and
// every request carries the configured headers.
func (s *Server) connectHTTP(ctx context.Context) (*conn, error) {
	rt := &headerTransport{base: s.d.Transport, headers: s.res.headers, limit: s.d.MaxMessage}
	hc := &http.Client{Transport: rt, CheckRedirect: sameHost}
	t := &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.d.MaxMessage + 1<<20}
	c := newConn(s, nil, nil)
	rt.over = &c.httpOver
	return s.session(ctx, c, t)
}

// sameHost refuses a redirect to another host (the credentials in the
// headers are for the configured one) and long chains.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("more than 5 redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return fmt.Errorf("redirect from %s to another host (%s) refused", via[0].URL.Host, req.URL.Host)
	}
	return nil
}

// headerTransport adds the configured headers to each request and bounds
// what a response may make the client hold.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	limit   int
	over    *atomic.Bool
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	// A JSON body is bounded whole; an event stream line by line (one
	// event's data is one line in practice; the sdk bounds a whole event
	// a little above).
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	f := &frameLimit{r: resp.Body, limit: t.limit, lines: stream}
	f.onOver = func() { t.over.Store(true) }
	resp.Body = f
	return resp, nil
}
