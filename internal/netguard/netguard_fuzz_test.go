package netguard

import (
	"errors"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
	"golang.org/x/net/idna"
)

// nonPublic is an oracle independent of classify: the standard library's
// predicates and the metadata address, judged on the unwrapped IPv4 of an
// IPv4-mapped address.
func nonPublic(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() ||
		ip == netip.AddrFrom4([4]byte{169, 254, 169, 254})
}

var atonPart = regexp.MustCompile(`^(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$`)

// literalAddr reads host the way a dialer or a C resolver might: an IP
// literal (with a zone), or an inet_aton spelling of IPv4.
func literalAddr(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip, true
	}
	parts := strings.Split(h, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		if !atonPart.MatchString(p) {
			return netip.Addr{}, false
		}
		digits, base := p, 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			digits, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			digits, base = p[1:], 8
		}
		v := uint64(0)
		if digits != "" {
			var err error
			if v, err = strconv.ParseUint(digits, base, 64); err != nil {
				return netip.Addr{}, false
			}
		}
		vals = append(vals, v)
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

// FuzzCheckURL parses arbitrary text as a URL and checks it. CheckURL must
// never panic, and a URL it accepts must not name a loopback, private,
// link-local, unspecified, multicast or metadata address literally, in any
// spelling a dialer would accept (IDNA mapped, as Go's transport does, then
// an IP literal or an inet_aton form).
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/", "http://127.0.0.1/", "http://[::1]:8080/", "http://2130706433/", "http://0177.0.0.1/",
		"http://0x7f.1/", "http://127.1/", "http://[::ffff:127.0.0.1]/", "http://１２７.０.０.１/", "http://169.254.169.254/latest",
		"http://[fe80::1%25eth0]/", "http://localhost./", "http://10.0.0.1.", "http://user:pw@example.com/", "ftp://example.com/",
		"http://0/", "http://0x/", "http://[::]/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "//example.com",
		"http://example.com:99999/", "http://%31%32%37.0.0.1/", "http://127.0.0.1%2f@x/", "https://xn--nxasmq6b.com/",
		"http://192.168.1.1", "http://[::ffff:a9fe:a9fe]/", "http://0300.0250.0.1/", "HTTP://LOCALHOST/", "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/",
	} {
		f.Add(s)
	}
	g, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if err := g.CheckURL(u); err != nil {
			if _, ok := err.(*toolerr.Error); !ok || !errors.Is(err, ErrRefused) {
				t.Fatalf("CheckURL(%q) returned %T: %v", raw, err, err)
			}
			return
		}
		host := u.Hostname()
		dialed := host
		if a, err := idna.Lookup.ToASCII(host); err == nil {
			dialed = a
		}
		for _, h := range []string{host, dialed} {
			if ip, ok := literalAddr(h); ok && nonPublic(ip) {
				t.Fatalf("CheckURL accepted %q, whose host %q is the non-public address %s", raw, h, ip)
			}
		}
	})
}

// FuzzDecide feeds every IPv6 address (IPv4 ones as mapped and plain) to
// Decide: an address it lets a connection reach must be public by the
// standard library's reckoning.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "::1", "::ffff:192.168.0.1", "fe80::1", "169.254.169.254", "8.8.8.8", "2001:4860::8888", "fd00::1", "::", "ff02::1", "100.64.0.1", "64:ff9b::a00:1"} {
		ip := netip.MustParseAddr(s)
		b := ip.As16()
		f.Add(b[:])
	}
	g, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 16 {
			return
		}
		ip6 := netip.AddrFrom16([16]byte(b))
		for _, ip := range []netip.Addr{ip6, ip6.Unmap()} {
			if g.Decide(ip, "") == nil && nonPublic(ip) {
				t.Fatalf("Decide allowed the non-public address %s", ip)
			}
		}
	})
}
