package netguard

import (
	"net/netip"
)

// blockedRange is a range of addresses toolsvc never connects to unless an
// operator opens it, with the words a model sees when it is refused.
type blockedRange struct {
	prefix netip.Prefix
	kind   string
}

// metadataAddrs are the cloud instance-metadata endpoints (AWS, GCP, Azure,
// OpenStack at 169.254.169.254; AWS IPv6; Alibaba). They hold credentials,
// so a host-name exception never opens them: only an explicit CIDR does.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("169.254.170.2"), // AWS ECS task metadata
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// blockedV4 lists the IPv4 ranges that are not the public Internet
// (RFC 6890 special-purpose registry and friends).
var blockedV4 = []blockedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\" (0.0.0.0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (100.64.0.0/10)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment (192.0.0.0/24)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.31.196.0/24"), "AS112 (192.31.196.0/24)"},
	{netip.MustParsePrefix("192.52.193.0/24"), "AMT (192.52.193.0/24)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast (192.88.99.0/24)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.175.48.0/24"), "AS112 (192.175.48.0/24)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (198.18.0.0/15)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4) or broadcast"},
}

// blockedV6 lists IPv6 ranges inside global unicast (2000::/3) that are not
// the public Internet. Everything outside 2000::/3 is refused anyway (see
// classifyV6); the wrappers of IPv4 (mapped, NAT64, 6to4, Teredo) are
// unwrapped and judged by the IPv4 inside.
var blockedV6 = []blockedRange{
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking (2001:2::/48)"},
	{netip.MustParsePrefix("2001:10::/28"), "ORCHID (2001:10::/28)"},
	{netip.MustParsePrefix("2001:20::/28"), "ORCHIDv2 (2001:20::/28)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation (2001:db8::/32)"},
	{netip.MustParsePrefix("3fff::/20"), "documentation (3fff::/20)"},
}

var (
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
	ipv4Compatible  = netip.MustParsePrefix("::/96")
	ipv4Translated  = netip.MustParsePrefix("::ffff:0:0:0/96")
	nat64Well       = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local      = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour       = netip.MustParsePrefix("2002::/16")
	teredo          = netip.MustParsePrefix("2001::/32")
	uniqueLocal     = netip.MustParsePrefix("fc00::/7")
	linkLocalV6     = netip.MustParsePrefix("fe80::/10")
	siteLocalV6     = netip.MustParsePrefix("fec0::/10")
	multicastV6     = netip.MustParsePrefix("ff00::/8")
	discardV6       = netip.MustParsePrefix("100::/64")
)

// classify returns why ip is not a public Internet address, or "" when it
// is. IPv6 addresses that carry an IPv4 address (mapped, compatible,
// NAT64, 6to4, Teredo) are judged by the IPv4 address they carry, so
// ::ffff:a9fe:a9fe is the metadata endpoint and 2002:7f00:1:: is loopback.
func classify(ip netip.Addr) string {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		if k := classify(ip.Unmap()); k != "" {
			return k + ", written as IPv4-mapped IPv6"
		}
		return ""
	}
	if ip.Is4() {
		if isMetadata(ip) {
			return "cloud metadata endpoint"
		}
		for _, r := range blockedV4 {
			if r.prefix.Contains(ip) {
				return r.kind
			}
		}
		return ""
	}
	return classifyV6(ip)
}

// wrapped judges IPv4 addresses carried inside an IPv6 one by the named
// mechanism: the IPv6 address is refused when any of them would be.
func wrapped(mechanism string, v4s ...[4]byte) string {
	for _, v4 := range v4s {
		if k := classify(netip.AddrFrom4(v4)); k != "" {
			return k + ", wrapped in " + mechanism
		}
	}
	return ""
}

func classifyV6(ip netip.Addr) string {
	b := ip.As16()
	switch {
	case isMetadata(ip):
		return "cloud metadata endpoint"
	case ip == netip.IPv6Unspecified():
		return "unspecified (::)"
	case ip == netip.IPv6Loopback():
		return "loopback (::1)"
	case ipv4Compatible.Contains(ip):
		// Deprecated IPv4-compatible form ::a.b.c.d; some stacks still
		// route it to the IPv4 address.
		return "IPv4-compatible IPv6 (::/96)"
	case ipv4Translated.Contains(ip):
		return "IPv4-translated IPv6 (::ffff:0:0:0/96)"
	case nat64Local.Contains(ip):
		return "local-use NAT64 (64:ff9b:1::/48)"
	case nat64Well.Contains(ip):
		return wrapped("NAT64 (64:ff9b::/96)", [4]byte{b[12], b[13], b[14], b[15]})
	case sixToFour.Contains(ip):
		return wrapped("6to4 (2002::/16)", [4]byte{b[2], b[3], b[4], b[5]})
	case teredo.Contains(ip):
		// Teredo: the server's IPv4 is bits 32-63, the client's is the
		// last 32 bits inverted. Either may point inside.
		return wrapped("Teredo (2001::/32)", [4]byte{b[4], b[5], b[6], b[7]}, [4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	case uniqueLocal.Contains(ip):
		return "unique local IPv6 (fc00::/7)"
	case linkLocalV6.Contains(ip):
		return "link-local IPv6 (fe80::/10)"
	case siteLocalV6.Contains(ip):
		return "site-local IPv6 (fec0::/10)"
	case multicastV6.Contains(ip):
		return "multicast"
	case discardV6.Contains(ip):
		return "discard-only IPv6 (100::/64)"
	case !globalUnicastV6.Contains(ip):
		return "reserved IPv6 (outside 2000::/3)"
	}
	for _, r := range blockedV6 {
		if r.prefix.Contains(ip) {
			return r.kind
		}
	}
	return ""
}

func isMetadata(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	for _, m := range metadataAddrs {
		if ip == m {
			return true
		}
	}
	return false
}
