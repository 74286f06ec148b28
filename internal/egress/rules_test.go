package egress

import (
	"strings"
	"testing"
)

func mustRules(t testing.TB, allow, deny []string) *Rules {
	t.Helper()
	r, err := ParseRules(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRulesDecide covers the rules' semantics: wildcards and the apex,
// ports (none: 80 and 443 for allow, every port for deny; one; *), CIDRs
// in IPv4 and IPv6, deny over allow, and the normalisation of names.
func TestRulesDecide(t *testing.T) {
	r := mustRules(t, []string{
		"*.npmjs.org",
		"registry.yarnpkg.com:443",
		"example.com",
		"any.example.net:*",
		"*.example.org:*",
		"10.1.2.0/24",
		"192.0.2.7:8443",
		"2001:db8::/32:443",
		"[2001:db8:ffff::1]:*",
		"fd00:1::/32",
		"Files.Pythonhosted.ORG.",
		"bücher.test",
		"xn--caf-dma.test",
	}, []string{
		"evil.example.org",
		"*.bad.npmjs.org",
		"tracker.example.org:443",
		"10.1.2.128/25",
		"[2001:db8::dead]",
	})
	cases := []struct {
		host    string
		port    int
		allowed bool
		rule    string // a substring of Decision.Rule
	}{
		// wildcards: sub-domains at any depth, never the apex
		{"registry.npmjs.org", 443, true, `allow "*.npmjs.org"`},
		{"a.b.registry.npmjs.org", 80, true, `allow "*.npmjs.org"`},
		{"npmjs.org", 443, false, `no allow rule matches: allow "*.npmjs.org" covers the names below npmjs.org, not npmjs.org itself`},
		{"evilnpmjs.org", 443, false, "no allow rule matches"},
		{"npmjs.org.evil.com", 443, false, "no allow rule matches"},
		{".npmjs.org", 443, false, "not a valid host name"},
		// ports
		{"registry.npmjs.org", 8080, false, `no allow rule matches port 8080: allow "*.npmjs.org" covers ports 80 and 443 only`},
		{"registry.yarnpkg.com", 443, true, `allow "registry.yarnpkg.com:443"`},
		{"registry.yarnpkg.com", 80, false, `allow "registry.yarnpkg.com:443" covers port 443 only (an allow entry registry.yarnpkg.com:80 or registry.yarnpkg.com:* would allow it)`},
		{"example.com", 80, true, `allow "example.com"`},
		{"example.com", 443, true, `allow "example.com"`},
		{"example.com", 22, false, "covers ports 80 and 443 only"},
		{"www.example.com", 443, false, "no allow rule matches"},
		{"any.example.net", 5432, true, `allow "any.example.net:*"`},
		{"example.com", 0, false, "not a valid port"},
		{"example.com", 65536, false, "not a valid port"},
		// IPv4 CIDRs; a name entry never matches an address, nor the reverse
		{"10.1.2.3", 443, true, `allow "10.1.2.0/24"`},
		{"[10.1.2.3]", 80, true, `allow "10.1.2.0/24"`},
		{"::ffff:10.1.2.3", 443, true, `allow "10.1.2.0/24"`},
		{"10.1.3.1", 443, false, "an IP address is allowed only by a CIDR rule"},
		{"10.1.2.3", 22, false, "covers ports 80 and 443 only (an allow entry 10.1.2.0/24:22 or 10.1.2.0/24:* would allow it)"},
		{"192.0.2.7", 8443, true, `allow "192.0.2.7:8443"`},
		{"192.0.2.7", 443, false, "covers port 8443 only"},
		{"93.184.215.14", 443, false, "an IP address is allowed only by a CIDR rule"},
		// IPv6 CIDRs, with and without brackets
		{"2001:db8::1", 443, true, `allow "2001:db8::/32:443"`},
		{"[2001:db8:1::1]", 443, true, `allow "2001:db8::/32:443"`},
		{"2001:db8::1", 80, false, "covers port 443 only (an allow entry [2001:db8::/32]:80"},
		{"2001:db8:ffff::1", 22, true, `allow "[2001:db8:ffff::1]:*"`},
		{"2001:db9::1", 443, false, "no allow rule matches"},
		{"fd00:1::1", 443, true, `allow "fd00:1::/32"`},
		{"[FD00:1::1]", 80, true, `allow "fd00:1::/32"`},
		{"fd00:2::1", 443, false, "an IP address is allowed only by a CIDR rule"},
		{"fe80::1%eth0", 443, false, "not a valid host name"},
		// deny wins; a deny entry without a port denies every port
		{"evil.example.org", 443, false, `deny "evil.example.org"`},
		{"evil.example.org", 8080, false, `deny "evil.example.org"`},
		{"sub.evil.example.org", 443, true, `allow "*.example.org:*"`}, // deny names the host only
		{"x.bad.npmjs.org", 443, false, `deny "*.bad.npmjs.org"`},
		{"bad.npmjs.org", 443, true, `allow "*.npmjs.org"`}, // a deny wildcard spares the apex too
		{"tracker.example.org", 443, false, `deny "tracker.example.org:443"`},
		{"tracker.example.org", 8443, true, `allow "*.example.org:*"`},
		{"10.1.2.200", 443, false, `deny "10.1.2.128/25"`},
		{"::ffff:10.1.2.200", 443, false, `deny "10.1.2.128/25"`},
		{"2001:db8::dead", 443, false, `deny "[2001:db8::dead]"`},
		// normalisation: case, one trailing dot, IDNA both ways
		{"REGISTRY.NPMJS.ORG", 443, true, `allow "*.npmjs.org"`},
		{"registry.npmjs.org.", 443, true, `allow "*.npmjs.org"`},
		{"registry.npmjs.org..", 443, false, "not a valid host name"},
		{"files.pythonhosted.org", 443, true, `allow "Files.Pythonhosted.ORG."`},
		{"xn--bcher-kva.test", 443, true, `allow "bücher.test"`},
		{"BÜCHER.test", 443, true, `allow "bücher.test"`},
		{"café.test", 443, true, `allow "xn--caf-dma.test"`},
		{"EVIL.Example.Org.", 443, false, `deny "evil.example.org"`},
		// what is neither a name nor an address
		{"", 443, false, "not a valid host name"},
		{"exa mple.com", 443, false, "not a valid host name"},
		{"127.1", 443, false, "not a valid host name"},
		{"0x7f.1", 443, false, "not a valid host name"},
		{"[example.com]", 443, false, "not a valid host name"},
		{strings.Repeat("a", 64) + ".com", 443, false, "not a valid host name"},
	}
	for _, c := range cases {
		d := r.Decide(c.host, c.port)
		if d.Allowed != c.allowed || !strings.Contains(d.Rule, c.rule) {
			t.Errorf("Decide(%q, %d) = %+v, want allowed=%v and a rule with %q", c.host, c.port, d, c.allowed, c.rule)
		}
	}
}

// TestRulesEmpty: no entries, and nil Rules, refuse everything.
func TestRulesEmpty(t *testing.T) {
	for _, r := range []*Rules{mustRules(t, nil, nil), nil} {
		if d := r.Decide("example.com", 443); d.Allowed || d.Rule != "no allow rule matches" {
			t.Errorf("%+v", d)
		}
	}
}

// TestParseRulesErrors: each bad entry is named, with the expected form.
func TestParseRulesErrors(t *testing.T) {
	bad := map[string]string{
		"":                     "empty entry",
		"*":                    "not a host name or wildcard",
		"*.":                   "not a host name or wildcard",
		"foo*.example.com":     "not a host name or wildcard",
		"*.*.example.com":      "not a host name or wildcard",
		"http://example.com":   "is not a CIDR",
		"example.com/path":     "is not a CIDR",
		"user@example.com":     "not a host name or wildcard",
		"example.com:":         `the port "" is not a number from 1 to 65535 or *`,
		"example.com:0":        "not a number from 1 to 65535",
		"example.com:65536":    "not a number from 1 to 65535",
		"example.com:https":    "not a number from 1 to 65535",
		"example.com:-1":       "not a number from 1 to 65535",
		"10.1.2.0/33":          "is not a CIDR",
		"10.1.2.0/24:x":        "not a number from 1 to 65535",
		"[example.com]:443":    "is not a CIDR",
		"[2001:db8::1":         "unclosed",
		"[2001:db8::1]443":     "is not :port",
		"*.10.1.2.3":           "is an IP address; a wildcard takes a domain name",
		"exa mple.com":         "not a host name or wildcard",
		"a..example.com":       "is not a valid host name",
		"127.1":                "is not a valid host name",
		"fe80::1%eth0":         "is not a CIDR",
		"bad_idna_\u00ad.test": "not a valid host name",
	}
	for entry, want := range bad {
		_, err := ParseRules([]string{"ok.example.com", entry}, nil)
		if err == nil {
			t.Errorf("allow %q was accepted", entry)
			continue
		}
		msg := err.Error()
		for _, s := range []string{"allow entry " + quote(entry), want, "expected a host name (registry.npmjs.org)", "ports 80 and 443"} {
			if !strings.Contains(msg, s) {
				t.Errorf("allow %q: error %q lacks %q", entry, msg, s)
			}
		}
	}
	// Every bad entry is reported, deny entries under their own name.
	_, err := ParseRules([]string{"a b", "ok.example.com"}, []string{"c:0"})
	if err == nil || !strings.Contains(err.Error(), `allow entry "a b"`) || !strings.Contains(err.Error(), `deny entry "c:0"`) {
		t.Errorf("want both bad entries named, got %v", err)
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteString(`"`)
	b.WriteString(strings.NewReplacer(`"`, `\"`, "\u00ad", `\u00ad`).Replace(s))
	b.WriteString(`"`)
	return b.String()
}

// TestDecideAllocs: an allowed destination, and the usual refusals, cost
// no allocation.
func TestDecideAllocs(t *testing.T) {
	r := mustRules(t, []string{"*.npmjs.org", "example.com:443", "10.0.0.0/8:*"}, []string{"evil.npmjs.org"})
	for _, c := range []struct {
		host string
		port int
	}{
		{"registry.npmjs.org", 443}, {"example.com", 443}, {"10.1.2.3", 5432}, {"[2001:db8::1]", 443},
		{"evil.npmjs.org", 443}, {"unlisted.example.net", 443}, {"registry.npmjs.org.", 443},
	} {
		if n := testing.AllocsPerRun(100, func() { r.Decide(c.host, c.port) }); n != 0 {
			t.Errorf("Decide(%q, %d) allocates %v times", c.host, c.port, n)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	r := mustRules(b, []string{"*.npmjs.org", "registry.yarnpkg.com", "*.pythonhosted.org", "pypi.org", "10.0.0.0/8:*"},
		[]string{"evil.npmjs.org"})
	b.ReportAllocs()
	for b.Loop() {
		if !r.Decide("registry.npmjs.org", 443).Allowed {
			b.Fatal("refused")
		}
	}
}
