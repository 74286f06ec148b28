package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// TestStartupMistakes: every setting mistake a person makes at start-up
// is answered with the variable, the form it takes, and a next step;
// none names a Go type or a Go function.
func TestStartupMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{"EXEC_TIMEOUT", "ten", []string{`TOOLSVC_EXEC_TIMEOUT="ten" is not a valid duration. Next: write a duration such as 30s, 2m or 1h30m`}},
		{"CALL_TIMEOUT", "30", []string{`TOOLSVC_CALL_TIMEOUT="30" is not a valid duration: it has no unit. Next: write a duration such as 30s`}},
		{"AUDIT_ENABLED", "yes", []string{`TOOLSVC_AUDIT_ENABLED="yes" is not a valid boolean. Next: write true or false`}},
		{"READ_MAX_CHARS", "50k", []string{`TOOLSVC_READ_MAX_CHARS="50k" is not a valid whole number. Next: write a whole number such as 0, 100 or 65536, without a unit`}},
		{"MIN_FREE_BYTES", "99999999999999999999", []string{`is not a valid whole number: it is too large. Next:`}},
		{"EXEC_MAX_MEMORY", "lots", []string{`TOOLSVC_EXEC_MAX_MEMORY="lots" is not a valid amount of memory. Next: write a number of bytes, or a number with KiB, MiB or GiB, such as 512MiB`}},
		{"EXEC_MAX_MEMORY", "-1G", []string{`is not a valid amount of memory: it is negative. Next:`}},
		{"EXEC_DENY_PATTERNS", "rm (", []string{`TOOLSVC_EXEC_DENY_PATTERNS="rm (" is not a valid list of patterns: invalid pattern "rm (":`, "Next: write regular expressions (Go RE2 syntax)"}},
		{"API_KEYS", "a=first-key-0123456789,a=second-key-0123456789", []string{`TOOLSVC_API_KEYS is not a valid list of keys: the key name "a" is given twice`, "Next: write comma-separated keys, each name=key or a bare key"}},
		{"WEBHOOK_URL", "ops=https://h.example/one,ops=https://h.example/two", []string{`TOOLSVC_WEBHOOK_URL is not a valid value or list of accounts: account "ops" is given twice. Next: write one value, or name=value pairs`}},
		{"ADDR", "18242", []string{`TOOLSVC_ADDR: "18242" is not host:port. Next: write host:port, e.g. 127.0.0.1:18242 (or :18242 for every address, which needs API keys)`}},
		{"ADDR", "localhost", []string{`TOOLSVC_ADDR: "localhost" is not host:port. Next: write host:port, e.g. 127.0.0.1:8080 (or :8080 for every address, which needs API keys)`}},
		{"ADDR", "::1:9000", []string{`e.g. 127.0.0.1:8080`, `an IPv6 address goes in brackets: [::1]:8080`}},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			dir := t.TempDir()
			_, err := LoadFrom(mapLookup(map[string]string{"WORKSPACE": dir + "/ws", "DATA_DIR": dir + "/data", tc.name: tc.value}))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s\nlacks %q", msg, w)
				}
			}
			for _, goName := range []string{"time.Duration", "config.", "strconv", "ParseInt", "ParseBool", "invalid syntax", "second-key", "h.example"} {
				if strings.Contains(msg, goName) {
					t.Errorf("%s\nnames %q", msg, goName)
				}
			}
		})
	}
}

// TestEveryTypeHasAForm: a setting of a type formOf does not know would
// be described as a bare "value".
func TestEveryTypeHasAForm(t *testing.T) {
	for _, s := range settings() {
		if f := formOf(s.Type); s.Type.Kind() != reflect.String && f.noun == "value" {
			t.Errorf("%s (%s) has no form", s.Name, s.Type)
		}
	}
}

func TestListenError(t *testing.T) {
	inUse := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	for _, tc := range []struct {
		addr string
		err  error
		want []string
	}{
		{"127.0.0.1:8080", inUse, []string{"TOOLSVC_ADDR: 127.0.0.1:8080 is already in use by another program", "Next: choose another port, e.g. TOOLSVC_ADDR=127.0.0.1:8081", "ss -ltnp 'sport = :8080'"}},
		{":18242", inUse, []string{"TOOLSVC_ADDR: :18242 is already in use", "TOOLSVC_ADDR=127.0.0.1:18243", "ss -ltnp 'sport = :18242'"}},
		{"127.0.0.1:8080", fmt.Errorf("wrapped: %w", wsaeAddrInUse), []string{"is already in use", "Next:"}},
		{"127.0.0.1:80", errors.New("listen tcp 127.0.0.1:80: bind: permission denied"), []string{"TOOLSVC_ADDR: listen tcp 127.0.0.1:80: bind: permission denied"}},
	} {
		msg := ListenError(tc.addr, tc.err).Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s\nlacks %q", msg, w)
			}
		}
	}
}
