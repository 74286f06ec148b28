package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/countbot/toolsvc/internal/netguard"
)

// expectedForm is the shape of a rule entry, quoted by every parse error.
const expectedForm = "expected a host name (registry.npmjs.org), a wildcard for its sub-domains (*.npmjs.org, which does not match npmjs.org itself) " +
	"or a CIDR for IP addresses (10.1.2.0/24, 2001:db8::/32, or one address), each with an optional :port or :* for every port " +
	"(registry.npmjs.org:443, 10.1.2.0/24:8080, [2001:db8::/32]:443); without a port an allow entry covers ports 80 and 443 and a deny entry every port"

// Port sets other than one port.
const (
	portsWeb = 0  // 80 and 443: an allow entry without a port
	portsAny = -1 // every port: ":*", or a deny entry without a port
)

// The texts of decisions no rule made. They are constants, so that a
// refusal of the common kinds allocates nothing either.
const (
	noAllowRule   = "no allow rule matches"
	noAllowRuleIP = "no allow rule matches; an IP address is allowed only by a CIDR rule such as 10.1.2.0/24"
	notAHostName  = "not a valid host name"
	notAPort      = "not a valid port"
)

// Rules decide by name which destinations a command may reach through the
// proxy. Entries are:
//
//   - a host name, "registry.npmjs.org": that name only;
//   - a wildcard, "*.npmjs.org": every name below npmjs.org, at any depth
//     ("registry.npmjs.org", "a.b.npmjs.org"), but not "npmjs.org" itself;
//   - a CIDR, "10.1.2.0/24" or "2001:db8::/32", or a single IP address: a
//     destination written as an IP address in that range. Host-name
//     entries never match an IP address and CIDR entries never match a
//     name: the proxy judges what the command asked for, not what a name
//     resolves to (the network guard judges that, when the proxy dials).
//
// Each may carry a port, ":443", or ":*" for every port. Without one, an
// allow entry covers ports 80 and 443 only (the web: http and https), and a
// deny entry covers every port, so that denying a name denies it whole.
// A deny entry that matches wins over every allow entry, however specific.
// Names are compared in lower case, without a trailing dot, in their IDNA
// ASCII form ("bücher.example" and "xn--bcher-kva.example" are one name).
//
// Rules are immutable and safe for concurrent use.
type Rules struct {
	allow, deny ruleSet
	// text is the entries as a model is told them (String).
	text string
}

type ruleSet struct {
	exact map[string][]rule // by canonical host name
	wild  map[string][]rule // "*.npmjs.org" under ".npmjs.org"
	cidrs []cidrRule
}

type rule struct {
	ports int    // one port, portsWeb or portsAny
	entry string // as written, trimmed: named by refusals that suggest a fix
	said  string // the Decision text: `allow "*.npmjs.org"`
}

type cidrRule struct {
	prefix netip.Prefix
	rule
}

// Decision is the rules' verdict on one destination.
type Decision struct {
	// Allowed reports whether the rules let the destination through.
	Allowed bool
	// Rule says what decided, for messages and audit records:
	// `allow "*.npmjs.org"`, `deny "evil.example.com:443"` (the entry as
	// written), or, when no entry decided, "no allow rule matches" with
	// what would have been needed ("not a valid host name" and "not a
	// valid port" for destinations no entry could ever match).
	Rule string
}

// ParseRules checks and compiles allow and deny entries (see Rules for
// their forms). Every bad entry is reported, each named with the form
// expected. No entries at all is valid: such Rules refuse everything.
func ParseRules(allow, deny []string) (*Rules, error) {
	r := &Rules{allow: newRuleSet(), deny: newRuleSet()}
	var errs []error
	for _, s := range allow {
		if err := r.allow.add("allow", s, portsWeb); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range deny {
		if err := r.deny.add("deny", s, portsAny); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.text = describe(allow, deny)
	return r, nil
}

// describe says which destinations the entries allow, as a tool's
// description tells a model.
func describe(allow, deny []string) string {
	trim := func(in []string) []string {
		out := make([]string, 0, len(in))
		for _, s := range in {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	a, d := trim(allow), trim(deny)
	if len(a) == 0 {
		return "no destination"
	}
	s := strings.Join(a, ", ") + " (ports 80 and 443 where no port is given; *.name: the names below name)"
	if len(d) > 0 {
		s += ", except " + strings.Join(d, ", ")
	}
	return s
}

// String lists the entries: what a command may reach, in words a model
// reads.
func (r *Rules) String() string {
	if r == nil {
		return "no destination"
	}
	return r.text
}

func newRuleSet() ruleSet {
	return ruleSet{exact: map[string][]rule{}, wild: map[string][]rule{}}
}

// add parses one entry of the kind ("allow" or "deny") into the set;
// defaultPorts applies when the entry names no port.
func (rs *ruleSet) add(kind, s string, defaultPorts int) error {
	entry := strings.TrimSpace(s)
	host, port, hasPort, err := splitEntry(entry)
	if err != nil {
		return fmt.Errorf("%s entry %q: %v; %s", kind, s, err, expectedForm)
	}
	ports := defaultPorts
	if hasPort {
		if ports, err = parsePorts(port); err != nil {
			return fmt.Errorf("%s entry %q: %v; %s", kind, s, err, expectedForm)
		}
	}
	r := rule{ports: ports, entry: entry, said: kind + " " + strconv.Quote(entry)}
	if prefix, ok, err := parseCIDREntry(host); ok {
		if err != nil {
			return fmt.Errorf("%s entry %q: %v; %s", kind, s, err, expectedForm)
		}
		rs.cidrs = append(rs.cidrs, cidrRule{prefix: prefix, rule: r})
		return nil
	}
	pattern, err := parseNameEntry(host)
	if err != nil {
		return fmt.Errorf("%s entry %q: %v; %s", kind, s, err, expectedForm)
	}
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		rs.wild[suffix] = append(rs.wild[suffix], r)
	} else {
		rs.exact[pattern] = append(rs.exact[pattern], r)
	}
	return nil
}

// splitEntry cuts an entry into its host part (name, address or CIDR) and
// its port, if any: "host:443", "10.1.2.0/24:443", "[2001:db8::1]:443",
// "2001:db8::/32:443". An IPv6 address without brackets and without a
// prefix length has no port: its colons are its own.
func splitEntry(s string) (host, port string, hasPort bool, err error) {
	if s == "" {
		return "", "", false, errors.New("empty entry")
	}
	if rest, ok := strings.CutPrefix(s, "["); ok {
		inner, after, ok := strings.Cut(rest, "]")
		if !ok || inner == "" {
			return "", "", false, errors.New("unclosed or empty [ ]")
		}
		if after == "" {
			return "[" + inner + "]", "", false, nil
		}
		port, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", "", false, fmt.Errorf("%q after ] is not :port", after)
		}
		return "[" + inner + "]", port, true, nil
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		if j := strings.IndexByte(s[i:], ':'); j >= 0 {
			return s[:i+j], s[i+j+1:], true, nil
		}
		return s, "", false, nil
	}
	if strings.Count(s, ":") == 1 {
		host, port, _ := strings.Cut(s, ":")
		return host, port, true, nil
	}
	return s, "", false, nil
}

// parsePorts reads a port number (1 to 65535) or "*".
func parsePorts(s string) (int, error) {
	if s == "*" {
		return portsAny, nil
	}
	if p, ok := parsePort(s); ok {
		return p, nil
	}
	return 0, fmt.Errorf("the port %q is not a number from 1 to 65535 or *", s)
}

// parsePort reads a decimal port number from 1 to 65535, digits only.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n >= 1 && n <= 65535
}

// parseCIDREntry reads the host part of an entry as a CIDR or an IP
// address, with netguard's parser (the one the operator's
// TOOLSVC_NET_ALLOW_CIDRS goes through). ok is false when the part is
// meant as a host name.
func parseCIDREntry(host string) (netip.Prefix, bool, error) {
	inner, bracketed := strings.CutPrefix(host, "[")
	if bracketed {
		inner = strings.TrimSuffix(inner, "]")
	}
	_, addrErr := netip.ParseAddr(inner)
	if !bracketed && !strings.Contains(inner, "/") && addrErr != nil {
		return netip.Prefix{}, false, nil
	}
	p, err := netguard.ParseCIDR(inner)
	return p, true, err
}

// parseNameEntry checks a host name or wildcard with netguard's pattern
// parser (the one TOOLSVC_NET_ALLOW_HOSTS goes through) and returns it in
// the canonical form Decide compares: "registry.npmjs.org" or
// "*.npmjs.org".
func parseNameEntry(host string) (string, error) {
	norm, err := netguard.ParseHostPattern(host)
	if err != nil {
		return "", errors.New("not a host name or wildcard")
	}
	rest, wild := strings.CutPrefix(norm, "*.")
	name, ip, ok := canonicalHost(rest)
	switch {
	case !ok:
		return "", fmt.Errorf("%q is not a valid host name", rest)
	case ip.IsValid():
		return "", fmt.Errorf("%q is an IP address; a wildcard takes a domain name", rest)
	case wild:
		return "*." + name, nil
	}
	return name, nil
}

// Decide judges a destination, host (a name or an IP address, with or
// without brackets) and port, as a command asked for it. Deny entries are
// tried first and win. An allowed destination, and the common refusals,
// cost no allocation for a host already in lower-case ASCII.
func (r *Rules) Decide(host string, port int) Decision {
	name, ip, ok := canonicalHost(host)
	if !ok {
		return Decision{Rule: notAHostName}
	}
	return r.decide(name, ip, port)
}

// decide is Decide on a canonical host (see canonicalHost).
func (r *Rules) decide(name string, ip netip.Addr, port int) Decision {
	if port < 1 || port > 65535 {
		return Decision{Rule: notAPort}
	}
	if r == nil {
		return Decision{Rule: noAllowRule}
	}
	if ip.IsValid() {
		if d, hit, _ := r.deny.matchIP(ip, port); hit {
			return Decision{Rule: d.said}
		}
		a, hit, near := r.allow.matchIP(ip, port)
		switch {
		case hit:
			return Decision{Allowed: true, Rule: a.said}
		case near != nil:
			return Decision{Rule: portMiss(near, port)}
		}
		return Decision{Rule: noAllowRuleIP}
	}
	if d, hit, _ := r.deny.matchName(name, port); hit {
		return Decision{Rule: d.said}
	}
	a, hit, near := r.allow.matchName(name, port)
	switch {
	case hit:
		return Decision{Allowed: true, Rule: a.said}
	case near != nil:
		return Decision{Rule: portMiss(near, port)}
	}
	if w := r.allow.wildcardOver(name); w != nil {
		return Decision{Rule: noAllowRule + ": " + w.said + " covers the names below " + name + ", not " + name + " itself"}
	}
	return Decision{Rule: noAllowRule}
}

// wildcardOver returns a wildcard rule for the names just below name
// ("*.npmjs.org" for "npmjs.org"), for a refusal of name that says why the
// wildcard did not match it.
func (rs *ruleSet) wildcardOver(name string) *rule {
	var buf [254]byte
	key := append(append(buf[:0], '.'), name...)
	if rules := rs.wild[string(key)]; len(rules) > 0 {
		return &rules[0]
	}
	return nil
}

// matchName finds the rule for name and port: the exact name first, then
// wildcards from the most specific suffix to the least. near is a rule
// that matched the name but not the port, for a refusal that says so.
func (rs *ruleSet) matchName(name string, port int) (hitRule *rule, hit bool, near *rule) {
	if h, n := matchPorts(rs.exact[name], port); h != nil {
		return h, true, nil
	} else if n != nil {
		near = n
	}
	if len(rs.wild) == 0 {
		return nil, false, near
	}
	// Only a suffix after a non-empty first label can match: "*.npmjs.org"
	// does not match "npmjs.org" or ".npmjs.org".
	for i := 1; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		rules, ok := rs.wild[name[i:]]
		if !ok {
			continue
		}
		if h, n := matchPorts(rules, port); h != nil {
			return h, true, nil
		} else if near == nil {
			near = n
		}
	}
	return nil, false, near
}

// matchIP finds the CIDR rule for ip and port; an IPv4-mapped IPv6
// address matches IPv4 ranges too, as it reaches the same host.
func (rs *ruleSet) matchIP(ip netip.Addr, port int) (hitRule *rule, hit bool, near *rule) {
	unmapped := ip.Unmap()
	for i := range rs.cidrs {
		c := &rs.cidrs[i]
		if !c.prefix.Contains(ip) && !c.prefix.Contains(unmapped) {
			continue
		}
		if portMatches(c.ports, port) {
			return &c.rule, true, nil
		}
		if near == nil {
			near = &c.rule
		}
	}
	return nil, false, near
}

// matchPorts returns the first rule covering port, or else the first
// rule at all (which matched the host but not the port).
func matchPorts(rules []rule, port int) (hit, near *rule) {
	for i := range rules {
		if portMatches(rules[i].ports, port) {
			return &rules[i], nil
		}
	}
	if len(rules) > 0 {
		return nil, &rules[0]
	}
	return nil, nil
}

func portMatches(ports, port int) bool {
	switch ports {
	case portsAny:
		return true
	case portsWeb:
		return port == 80 || port == 443
	}
	return ports == port
}

// portMiss says why a rule that names the host does not let port through,
// and how to write one that does.
func portMiss(near *rule, port int) string {
	covers := "ports 80 and 443 only"
	if near.ports > 0 {
		covers = "port " + strconv.Itoa(near.ports) + " only"
	}
	host, _, _, _ := splitEntry(near.entry)
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]" // an IPv6 address takes a port only in brackets
	}
	return fmt.Sprintf("no allow rule matches port %d: %s covers %s (an allow entry %s:%d or %s:* would allow it)",
		port, near.said, covers, host, port, host)
}

// canonicalHost returns host as the proxy judges and dials it: without
// brackets or one trailing dot, in its IDNA ASCII form, in lower case.
// ip is set when host is an IP address (without a zone). ok is false for
// anything else that is not a valid DNS name. A host already canonical is
// returned as it is, without allocating.
func canonicalHost(host string) (name string, ip netip.Addr, ok bool) {
	h := host
	bracketed := len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']'
	if bracketed {
		h = h[1 : len(h)-1]
	}
	h = strings.TrimSuffix(h, ".")
	if !isASCII(h) {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return "", netip.Addr{}, false
		}
		h = strings.TrimSuffix(a, ".")
	}
	if mayBeIP(h) {
		if a, err := netip.ParseAddr(h); err == nil {
			if a.Zone() != "" {
				return "", netip.Addr{}, false
			}
			return h, a, true
		}
	}
	if bracketed {
		return "", netip.Addr{}, false
	}
	h = strings.ToLower(h)
	return h, netip.Addr{}, validName(h)
}

// mayBeIP reports whether h could be an IP address (IPv6 has colons, IPv4
// only digits and dots), so that names skip netip.ParseAddr, whose error
// allocates.
func mayBeIP(h string) bool {
	if strings.IndexByte(h, ':') >= 0 {
		return true
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// validName reports whether h (lower case ASCII) is a DNS name: labels of
// 1 to 63 letters, digits, hyphens and underscores, 253 bytes in all, and a
// last label that is not all digits, so that the loose spellings of IPv4
// ("127.1", "0x7f.1") are never taken for names.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	label, digits := 0, true
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label, digits = 0, true
			continue
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'z', c == '-', c == '_':
			digits = false
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	return label > 0 && !digits
}
