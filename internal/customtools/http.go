package customtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// HTTPDeps are what HTTP tools run with.
type HTTPDeps struct {
	// Guard is the service's network guard, which every request passes
	// unless the tool says allow_private.
	Guard *netguard.Guard
	// GuardAllowing returns a guard like Guard that also lets one host
	// (a name, or an address as written in the URL) be reached at
	// private and loopback addresses, for tools with allow_private.
	GuardAllowing func(host string) (*netguard.Guard, error)
	// DefaultTimeout and DefaultMaxOutput apply when the tool gives none.
	DefaultTimeout   time.Duration
	DefaultMaxOutput int
}

// maxRedirects bounds the redirects an HTTP tool follows, all to the host
// of its URL.
const maxRedirects = 5

// errorExcerpt is how many characters of a non-2xx answer an error shows.
const errorExcerpt = 1000

// HTTP is a tool that POSTs its arguments as JSON to the operator's URL;
// a 2xx answer's body is the result.
type HTTP struct {
	spec   Spec
	client *http.Client
	max    int
}

// NewHTTP returns the HTTP tool of s.
func NewHTTP(s Spec, d HTTPDeps) (*HTTP, error) {
	if s.Timeout <= 0 {
		s.Timeout = d.DefaultTimeout
	}
	max := s.MaxOutput
	if max <= 0 {
		max = d.DefaultMaxOutput
	}
	g := d.Guard
	if s.HTTP.AllowPrivate {
		var err error
		if g, err = d.GuardAllowing(s.HTTP.URL.Hostname()); err != nil {
			return nil, fmt.Errorf("%s: allow_private: %w", s.Entry, err)
		}
	}
	host := s.HTTP.URL.Host
	client := &http.Client{
		Transport: g.Transport(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return toolerr.Errorf(toolerr.PolicyDenied, "the service redirected more than %d times. Next: tell the user the tool's service is misconfigured; the operator should point the tool at the final URL.", maxRedirects)
			}
			if !strings.EqualFold(req.URL.Host, host) {
				return toolerr.Errorf(toolerr.PolicyDenied, "the service redirected to another host (%s), which is not followed. Next: tell the user the tool's service moved; the operator should change the tool's url.", req.URL.Hostname())
			}
			return g.CheckURL(req.URL)
		},
	}
	return &HTTP{spec: s, client: client, max: max}, nil
}

// Name implements registry.Tool.
func (h *HTTP) Name() string { return h.spec.Name }

// Annotations implements registry.Annotated: what the entry states.
func (h *HTTP) Annotations() registry.Annotations { return h.spec.Hints }

// Description implements registry.Tool.
func (h *HTTP) Description() string { return h.spec.Description }

// Parameters implements registry.Tool.
func (h *HTTP) Parameters() json.RawMessage { return h.spec.Parameters }

// Timeout implements registry.Timeouter: a little above the request's own
// timeout, so that the request's, with its clearer message, fires first.
func (h *HTTP) Timeout() time.Duration { return h.spec.Timeout + 5*time.Second }

// Execute implements registry.Tool.
func (h *HTTP) Execute(ctx context.Context, args json.RawMessage) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, h.spec.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, h.spec.HTTP.URL.String(), bytes.NewReader(args))
	if err != nil {
		return "", toolerr.Errorf(toolerr.ToolError, "%s: could not build the request: %v", h.spec.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	req.Header.Set("User-Agent", "toolsvc")
	for k, v := range h.spec.HTTP.Headers {
		req.Header.Set(k, v)
	}
	if call, ok := registry.CallFrom(ctx); ok {
		req.Header.Set("X-Call-ID", call.ID)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return "", h.requestError(ctx, rctx, err)
	}
	defer resp.Body.Close()
	// Enough bytes for max characters of up to four bytes, and one more to
	// know there was more; the rest is never read.
	limit := int64(utf8.UTFMax*h.max) + 1
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return "", h.requestError(ctx, rctx, err)
	}
	more := int64(len(body)) == limit
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt := runes.Prefix(text, errorExcerpt)
		if len(excerpt) < len(text) || more {
			excerpt += " [...]"
		}
		if strings.TrimSpace(excerpt) == "" {
			excerpt = "(empty body)"
		}
		return "", toolerr.Errorf(toolerr.ToolError, "%s: the service answered HTTP %d %s.\n\n%s\n\nNext: check the arguments against the tool's description and retry, or tell the user the tool failed.",
			h.spec.Name, resp.StatusCode, http.StatusText(resp.StatusCode), excerpt)
	}
	out := runes.Prefix(text, h.max)
	if len(out) < len(text) || more {
		out += fmt.Sprintf("\n\n[... the answer was cut here: it is longer than %d characters]", h.max)
	}
	if strings.TrimSpace(out) == "" {
		return "(empty answer)", nil
	}
	return out, nil
}

// requestError says why a request failed: the call stopped, its timeout,
// the guard, or the network.
func (h *HTTP) requestError(ctx, rctx context.Context, err error) error {
	var te *toolerr.Error
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case rctx.Err() != nil:
		return toolerr.Errorf(toolerr.Timeout, "%s: the service did not answer within %s. Next: retry later or with a smaller request.", h.spec.Name, h.spec.Timeout)
	case errors.Is(err, netguard.ErrRefused):
		return toolerr.Errorf(toolerr.PolicyDenied, "%s", h.guardRefusal(err))
	case errors.As(err, &te):
		return toolerr.Errorf(te.Code, "%s: %s", h.spec.Name, te.Message)
	}
	return toolerr.Errorf(toolerr.ToolError, "%s: the request failed: %v. Next: retry later, or tell the user the tool's service is unreachable.", h.spec.Name, unwrapURL(err))
}

// guardRefusal says that the network guard refused the tool's own URL.
// The guard's own message ends with a next step for a model that chose
// the URL (fetch another one), which a model cannot do here: the URL is
// the operator's, so only the operator can open it, and the model's one
// step is to tell the user. That step is the only "Next:" of the answer.
func (h *HTTP) guardRefusal(err error) string {
	why := unwrapURL(err).Error()
	var te *toolerr.Error
	if errors.As(err, &te) {
		why = te.Message
	}
	why, _, _ = strings.Cut(why, " Next:")
	why = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(why), "Refused: "), ".")
	return fmt.Sprintf("%s: the network guard refused the request to the tool's own URL, which the operator set in the tools file: %s. "+
		"Next: do not retry or change the arguments, which cannot help; tell the user that this tool cannot reach its service "+
		"until the operator allows it (allow_private: true on the tool in the tools file, "+
		"or its host in TOOLSVC_NET_ALLOW_HOSTS, or its address range in TOOLSVC_NET_ALLOW_CIDRS).", h.spec.Name, why)
}

// unwrapURL drops the "Post \"url\": " prefix of a client error, which
// repeats what the operator wrote.
func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// String describes the runner for the start-up log (the URL without its
// query, which may hold a key).
func (h *HTTP) String() string {
	u := *h.spec.HTTP.URL
	u.RawQuery, u.Fragment = "", ""
	return fmt.Sprintf("http: POST %s, timeout %s, allow_private %t", u.String(), h.spec.Timeout, h.spec.HTTP.AllowPrivate)
}

// AllowHost returns the netguard options that open host (as written in a
// URL: a name or an address) at private addresses, added to base.
func AllowHost(base netguard.Options, host string) netguard.Options {
	h := strings.Trim(host, "[]")
	if ip, err := netip.ParseAddr(h); err == nil {
		base.AllowCIDRs = append(append([]string(nil), base.AllowCIDRs...), netip.PrefixFrom(ip, ip.BitLen()).String())
		return base
	}
	if net.ParseIP(h) == nil {
		base.AllowHosts = append(append([]string(nil), base.AllowHosts...), h)
	}
	return base
}

var (
	_ registry.Tool      = (*HTTP)(nil)
	_ registry.Timeouter = (*HTTP)(nil)
)
