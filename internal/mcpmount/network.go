package mcpmount

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/countbot/toolsvc/internal/egress"
)

// Network is an entry's "network": false (the default: none), true
// (every address), or a list of destinations (an allowlist: host names,
// *.wildcards, CIDRs, each with an optional :port), reached only through
// a proxy in the service, as exec's TOOLSVC_EXEC_NET_ALLOW.
type Network struct {
	On    bool
	Allow []string
	// Given is set when the entry says "network" at all: false given
	// means none even for a package runner, whose default is its
	// registry.
	Given bool
}

// UnmarshalJSON takes a boolean or a list of strings.
func (n *Network) UnmarshalJSON(b []byte) error {
	*n = Network{Given: true}
	if err := json.Unmarshal(b, &n.On); err == nil {
		return nil
	}
	if err := json.Unmarshal(b, &n.Allow); err != nil {
		return fmt.Errorf(`"network" %s: give true, false, or a list of the hosts the server may reach, such as ["registry.npmjs.org"]`, b)
	}
	if len(n.Allow) == 0 {
		return errors.New(`"network" is an empty list: give the hosts the server may reach, or false for none`)
	}
	if _, err := egress.ParseRules(n.Allow, nil); err != nil {
		return fmt.Errorf(`"network": %w`, err)
	}
	return nil
}

// MarshalJSON writes what UnmarshalJSON reads.
func (n Network) MarshalJSON() ([]byte, error) {
	if len(n.Allow) > 0 {
		return json.Marshal(n.Allow)
	}
	return json.Marshal(n.On)
}

// Set reports whether the entry gives any network.
func (n Network) Set() bool { return n.On || len(n.Allow) > 0 }

// String is the setting as the log shows it.
func (n Network) String() string {
	switch {
	case n.On:
		return "on"
	case len(n.Allow) > 0:
		return "only " + strings.Join(n.Allow, ", ")
	}
	return "off"
}

// Net is the network a server's sandbox gives it.
type Net int

// The networks a server's sandbox can give.
const (
	NetOff   Net = iota // none
	NetOn               // every address
	NetAllow            // a namespace of its own whose one way out is the proxy
)

// registryAllow is what a package runner's entry without "network" may
// reach: its package registry, read from the user's own configuration
// (the variables, then the files npm and pip read), so that npx, bunx,
// pnpm dlx and uvx can fetch what they run and nothing else. "" kind:
// not a package runner.
func registryAllow(kind string, lookupEnv func(string) (string, bool)) []string {
	switch kind {
	case "npm":
		return hostsOf(firstSet(lookupEnv, []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"},
			rcValue(lookupEnv, "registry", ".npmrc", "/etc/npmrc")), "https://registry.npmjs.org/")
	case "python":
		index := firstSet(lookupEnv, []string{"UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"},
			rcValue(lookupEnv, "index-url", ".config/pip/pip.conf", ".pip/pip.conf", "/etc/pip.conf"))
		if index == "" {
			// PyPI serves its index and its files from two names.
			return []string{"pypi.org:443", "files.pythonhosted.org:443"}
		}
		return hostsOf(index, "")
	}
	return nil
}

// firstSet is the first of the variables that is set, else fallback.
func firstSet(lookupEnv func(string) (string, bool), names []string, fallback string) string {
	for _, n := range names {
		if v, ok := lookupEnv(n); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return fallback
}

// rcValue reads key from the first of files (relative ones under the
// service's HOME) that sets it, as "key = value" lines.
func rcValue(lookupEnv func(string) (string, bool), key string, files ...string) string {
	home, _ := lookupEnv("HOME")
	for _, f := range files {
		if !filepath.IsAbs(f) {
			if home == "" {
				continue
			}
			f = filepath.Join(home, f)
		}
		if v := readKey(f, key); v != "" {
			return v
		}
	}
	return ""
}

func readKey(file, key string) string {
	fh, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// hostsOf is the allowlist entry (host:port) of a registry's URL, or of
// fallback when the URL is empty or not one.
func hostsOf(raw, fallback string) []string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Hostname() == "" {
		if fallback == "" {
			return nil
		}
		u, _ = url.Parse(fallback)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80"}[u.Scheme]
		if port == "" {
			port = "443"
		}
	}
	return []string{u.Hostname() + ":" + port}
}

// maxLoggedRefusals bounds the refusals logged per process of a server.
const maxLoggedRefusals = 20

// serveEgress serves the proxy of a process started with an allowlist:
// its destinations are the server's rules, its dials go through the
// service's network guard, and each refusal is a warning in the log
// naming the server, the destination and the rule. nil without one.
func (s *Server) serveEgress(proc interface{ Egress() net.Listener }) *egress.Proxy {
	l := proc.Egress()
	if l == nil {
		return nil
	}
	o := s.d.Egress
	o.Rules = s.rules
	o.Log = s.log
	var n atomic.Int64
	o.OnRefusal = func(r egress.Refusal) {
		// A server that retries in a loop must not flood the log: the
		// first ones say what to fix.
		switch c := n.Add(1); {
		case c == maxLoggedRefusals+1:
			s.log.Warn().Int("logged", maxLoggedRefusals).Msg("MCP server: more connections refused; not logged again until the server restarts")
			return
		case c > maxLoggedRefusals:
			return
		}
		s.log.Warn().Str("refused", r.String()).Msg("MCP server: its network refused a connection. Next: if the server needs it, add the host to the entry's \"network\" (when no rule matched), or open its address with TOOLSVC_NET_ALLOW_HOSTS (when the network guard refused it)")
	}
	p := egress.New(o)
	go func() { _ = p.Serve(l) }()
	return p
}
