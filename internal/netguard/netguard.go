// Package netguard is the one gate every outbound connection of toolsvc
// passes: it allows only http and https, and refuses loopback, private,
// link-local, metadata and other non-public addresses. The decision is made
// on the IP actually dialled (net.Dialer.Control), so DNS rebinding and
// redirects cannot slip past it; operators open exceptions by CIDR or host
// name.
package netguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/idna"

	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Options configure a Guard.
type Options struct {
	// AllowCIDRs are ranges an operator opened (TOOLSVC_NET_ALLOW_CIDRS).
	// A bare IP means that one address.
	AllowCIDRs []string
	// AllowHosts are host names an operator opened (TOOLSVC_NET_ALLOW_HOSTS):
	// exact ("wiki.corp") or a subdomain wildcard ("*.corp", which does not
	// match "corp" itself). Any address they resolve to is allowed, except a
	// cloud metadata endpoint, which only AllowCIDRs can open.
	AllowHosts []string
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
}

// Resolver resolves host names. *net.Resolver implements it; tests inject
// a stub so that no DNS query and no packet leaves the machine.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Guard decides which URLs and addresses toolsvc may connect to. It is safe
// for concurrent use.
type Guard struct {
	allowCIDRs []netip.Prefix
	exactHosts map[string]bool
	suffixes   []string // ".corp" for "*.corp"
	resolver   Resolver
	dialer     net.Dialer
}

// ErrRefused matches (with errors.Is) every refusal by the guard. A refusal
// is a *toolerr.Error with code policy_denied whose message is written for a
// model: what was refused, why, and what to do next.
var ErrRefused = errors.New("refused by the network guard")

const nextStep = "Next: fetch a public http(s) URL instead; if this internal site is meant to be reachable, an operator can open it with TOOLSVC_NET_ALLOW_HOSTS (host names) or TOOLSVC_NET_ALLOW_CIDRS (address ranges)."

func deny(format string, args ...any) error {
	return &toolerr.Error{Code: toolerr.PolicyDenied, Message: fmt.Sprintf(format, args...), Err: ErrRefused}
}

// New builds a Guard. A bad CIDR or host pattern is an error naming the
// variable it came from.
func New(opts Options) (*Guard, error) {
	g := &Guard{
		exactHosts: map[string]bool{},
		resolver:   opts.Resolver,
		dialer:     net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	for _, s := range opts.AllowCIDRs {
		p, err := ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("TOOLSVC_NET_ALLOW_CIDRS: %w", err)
		}
		g.allowCIDRs = append(g.allowCIDRs, p)
	}
	for _, h := range opts.AllowHosts {
		norm, err := ParseHostPattern(h)
		if err != nil {
			return nil, fmt.Errorf("TOOLSVC_NET_ALLOW_HOSTS: %w", err)
		}
		if suffix, ok := strings.CutPrefix(norm, "*"); ok {
			g.suffixes = append(g.suffixes, suffix)
		} else {
			g.exactHosts[norm] = true
		}
	}
	return g, nil
}

// ParseCIDR parses one TOOLSVC_NET_ALLOW_CIDRS entry: a CIDR, or a bare IP
// meaning that single address. Config validation uses it too.
func ParseCIDR(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.1.0.0/16 or fd00::/8", s)
		}
		return p.Masked(), nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.1.0.0/16 or an IP address", s)
	}
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}

// ParseHostPattern checks and normalises one TOOLSVC_NET_ALLOW_HOSTS entry:
// a host name, or "*." followed by a domain.
func ParseHostPattern(s string) (string, error) {
	h := normHost(s)
	rest, wild := strings.CutPrefix(h, "*.")
	if rest == "" || strings.ContainsAny(rest, "*/:@ ") || strings.HasPrefix(rest, ".") {
		return "", fmt.Errorf("%q is not a host name such as wiki.corp.example or *.corp.example", s)
	}
	if wild {
		return "*." + rest, nil
	}
	return rest, nil
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// hostAllowed reports whether the operator opened host by name.
func (g *Guard) hostAllowed(host string) bool {
	host = normHost(host)
	if host == "" {
		return false
	}
	if g.exactHosts[host] {
		return true
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func (g *Guard) cidrAllowed(ip netip.Addr) bool {
	ip = ip.WithZone("")
	for _, p := range g.allowCIDRs {
		if p.Contains(ip) || p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// Decide is the guard's verdict on connecting to ip for host (the name in
// the URL, or "" when the URL held the address itself). It sends nothing;
// the dialer calls it on the address it is about to connect to.
func (g *Guard) Decide(ip netip.Addr, host string) error {
	if !ip.IsValid() {
		return deny("Refused: no valid address to connect to. %s", nextStep)
	}
	if g.cidrAllowed(ip) {
		return nil
	}
	kind := classify(ip)
	if kind == "" {
		return nil
	}
	if g.hostAllowed(host) && !isMetadata(ip) && !isMetadataWrapped(kind) {
		return nil
	}
	shown := runes.Shorten(normHost(host), runes.Echo)
	if shown == "" || isIPLiteral(shown) {
		return deny("Refused: %s is not a public address (%s); toolsvc does not connect to loopback, private, link-local, metadata or other non-public addresses. %s", ip.WithZone(""), kind, nextStep)
	}
	// The resolved address is not shown: it would map internal DNS for
	// whoever steers the model.
	return deny("Refused: %s resolves to a non-public address (%s); toolsvc does not connect to loopback, private, link-local, metadata or other non-public addresses. %s", shown, kind, nextStep)
}

func isMetadataWrapped(kind string) bool { return strings.HasPrefix(kind, "cloud metadata") }

func isIPLiteral(h string) bool {
	_, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil
}

// CheckURL checks what can be known from the URL alone: the scheme (http or
// https only), no credentials, and a host that is not a non-public address
// written literally, in any spelling (decimal 2130706433, octal 0177.0.0.1,
// hex 0x7f.1, short 127.1, IPv4-mapped IPv6, full-width digits). Host names
// are judged when dialled, on the addresses they resolve to.
func (g *Guard) CheckURL(u *url.URL) error {
	if u == nil {
		return deny("Refused: no URL. Next: pass an absolute http:// or https:// URL.")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		if scheme == "" {
			return deny("Refused: %q has no scheme. Next: pass an absolute URL starting with https:// or http://.", redactURL(u))
		}
		return deny("Refused: the %q scheme is not allowed; only http and https URLs can be fetched. Next: pass an https:// or http:// URL.", runes.Shorten(scheme, runes.Echo))
	}
	if u.User != nil {
		return deny("Refused: URLs with a user name or password are not fetched. Next: pass the URL without the user@ part.")
	}
	host := u.Hostname()
	if host == "" {
		return deny("Refused: %q has no host. Next: pass an absolute URL such as https://example.com/page.", redactURL(u))
	}
	return g.checkHost(host)
}

// checkHost judges a host as written in a URL or a CONNECT line.
func (g *Guard) checkHost(host string) error {
	ascii, err := toASCII(host)
	if err != nil {
		return deny("Refused: the host %q is not a valid host name. Next: check the URL.", runes.Shorten(host, runes.Echo))
	}
	h := strings.TrimSuffix(ascii, ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return g.Decide(ip, "")
	}
	if ip, ok := parseLooseIPv4(h); ok {
		// A resolver or another HTTP stack may read these spellings as an
		// address while we read them as a name: refuse them outright.
		if err := g.Decide(ip, ""); err != nil {
			return deny("Refused: %q is the address %s written in an unusual notation; that address is not allowed. %s", runes.Shorten(host, runes.Echo), ip, nextStep)
		}
		return deny("Refused: %q is an IPv4 address written in an unusual notation. Next: write it as %s.", runes.Shorten(host, runes.Echo), ip)
	}
	return nil
}

// toASCII maps a host to the form the HTTP client dials (IDNA, so that
// full-width digits become ASCII digits, as Go's transport does).
func toASCII(host string) (string, error) {
	if isASCII(host) {
		return strings.ToLower(host), nil
	}
	return idna.Lookup.ToASCII(host)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// parseLooseIPv4 parses the inet_aton spellings of IPv4: one to four parts,
// each decimal, octal (leading 0) or hex (0x), the last filling the
// remaining bytes. It reports false for anything that is not such a number.
func parseLooseIPv4(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*uint(i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*uint(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	digits := p
	switch {
	case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, true // "0x" alone is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		d := digitVal(digits[i])
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func digitVal(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 99
}

// redactURL drops query and fragment (they may hold tokens) from a URL
// quoted in a message, and shortens what is left.
func redactURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return runes.Shorten(c.String(), runes.Echo)
}

// DialContext connects to addr (host:port) like net.Dialer.DialContext, but
// only to allowed addresses. Names are resolved once here; if any address a
// name resolves to is refused, the name is refused. The IP is checked again
// in the dialer's Control hook, on the very address the socket connects to.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, deny("Refused: network %q is not allowed; only TCP connections are made.", runes.Shorten(network, runes.Echo))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, deny("Refused: %q is not host:port. Next: check the URL.", runes.Shorten(addr, runes.Echo))
	}
	if err := g.checkHost(host); err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
		host = ""
	} else {
		res, err := g.resolver.LookupIPAddr(ctx, host)
		if err != nil {
			// The resolver's error names the host again: shorten it
			// there too, keeping the *net.DNSError callers look for.
			var de *net.DNSError
			if errors.As(err, &de) {
				short := *de
				short.Name = runes.Shorten(de.Name, runes.Echo)
				err = &short
			}
			return nil, fmt.Errorf("could not resolve %s: %w", runes.Shorten(host, runes.Echo), err)
		}
		for _, r := range res {
			ip, ok := netip.AddrFromSlice(r.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if err := g.Decide(ip, host); err != nil {
				return nil, err
			}
			ips = append(ips, ip)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("could not resolve %s: no addresses", runes.Shorten(host, runes.Echo))
		}
	}
	d := g.dialer
	d.Control = g.control(host)
	var firstErr error
	for _, ip := range ips {
		if network == "tcp4" && !ip.Is4() || network == "tcp6" && !ip.Is6() {
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		var refused *toolerr.Error
		if errors.Is(err, ErrRefused) && errors.As(err, &refused) {
			return nil, refused
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("no %s address for %s", network, addr)
	}
	return nil, firstErr
}

// control returns the net.Dialer.Control hook for a dial on behalf of host.
// It sees the socket's real destination, after every resolution.
func (g *Guard) control(host string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return deny("Refused: cannot check the address %q. Next: use a public http(s) URL.", runes.Shorten(address, runes.Echo))
		}
		return g.Decide(ap.Addr(), host)
	}
}

// Transport returns an http.Transport that dials only through the guard,
// verifies TLS certificates and ignores HTTP(S)_PROXY (a proxy would dial on
// our behalf, out of the guard's sight).
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  60 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// Client returns an http.Client on Transport that gives up after timeout
// (0: none) and follows at most maxRedirects redirects, checking every hop's
// URL before it is requested (the dialer then checks its address).
func (g *Guard) Client(timeout time.Duration, maxRedirects int) *http.Client {
	return &http.Client{
		Transport: g.Transport(),
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return deny("Refused: more than %d redirects. Next: fetch the final URL directly if you know it.", maxRedirects)
			}
			if err := g.CheckURL(req.URL); err != nil {
				return deny("Redirect to %s refused. %s", redactURL(req.URL), err)
			}
			return nil
		},
	}
}
