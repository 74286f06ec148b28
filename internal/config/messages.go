package config

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// valueForm is how a setting's value is written, told in words: what a
// value of its type is called, and what to write instead of a value that
// did not parse. A person reads these at start-up, so no Go type name
// ("time.Duration", "config.Bytes") appears in them.
type valueForm struct {
	noun string // "duration": "X is not a valid duration"
	next string // the step after "Next: "
}

// formOf returns the form of a setting of type t.
func formOf(t reflect.Type) valueForm {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return valueForm{"duration", "write a duration such as 30s, 2m or 1h30m (units: ms, s, m, h)"}
	case reflect.TypeFor[Bytes]():
		return valueForm{"amount of memory", "write a number of bytes, or a number with KiB, MiB or GiB, such as 512MiB, 4GiB or 1073741824"}
	case reflect.TypeFor[APIKeys]():
		return valueForm{"list of keys", "write comma-separated keys, each name=key or a bare key, every name and key once, such as alice=<key>,bob=<key>"}
	case reflect.TypeFor[Accounts](), reflect.TypeFor[SecretAccounts]():
		return valueForm{"value or list of accounts", "write one value, or name=value pairs separated by commas with each account named once, such as ops=<value>,dev=<value>"}
	case reflect.TypeFor[Patterns]():
		return valueForm{"list of patterns", "write regular expressions (Go RE2 syntax), one per line, or separated by commas when there is one line; escape a literal ( [ { . * + ? with a backslash"}
	case reflect.TypeFor[List]():
		return valueForm{"list", "write comma-separated values, such as a,b,c"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return valueForm{"boolean", "write true or false"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return valueForm{"whole number", "write a whole number such as 0, 100 or 65536, without a unit"}
	}
	return valueForm{"value", "see toolsvc help all for the form it takes"}
}

// decodeError is the start-up error of a setting whose value did not
// parse: the variable, the value unless it holds secrets (the message goes
// to the terminal and to whatever collects the service's output), the
// form expected, why this value is not one where the parser says more
// than "invalid syntax", and what to write instead.
func decodeError(s Setting, value string, err error) error {
	form := formOf(s.Type)
	what := fmt.Sprintf("%s=%q", s.Name, value)
	if secretField(s.Type, s.Name) {
		what = s.Name
	}
	msg := fmt.Sprintf("%s is not a valid %s", what, form.noun)
	if why := decodeReason(err); why != "" {
		msg += ": " + why
	}
	return fmt.Errorf("%s. Next: %s", msg, form.next)
}

// decodeReason is the part of a parser's error worth showing: a Decode
// method's own explanation, or that a number is out of range. strconv's
// and time's syntax errors only repeat the value, and name Go functions.
func decodeReason(err error) string {
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne):
		if errors.Is(ne.Err, strconv.ErrRange) {
			return "it is too large"
		}
		return ""
	case strings.HasPrefix(err.Error(), "time: "):
		if strings.Contains(err.Error(), "missing unit") {
			return "it has no unit"
		}
		return ""
	}
	return err.Error()
}

// addrError says that addr is not host:port, with an example built from
// what was written: a bare port number becomes the example's port.
func addrError(addr string) string {
	port := "8080"
	if n, err := strconv.ParseUint(strings.TrimPrefix(addr, ":"), 10, 16); err == nil && n > 0 {
		port = strconv.FormatUint(n, 10)
	}
	next := fmt.Sprintf("write host:port, e.g. 127.0.0.1:%s (or :%s for every address, which needs API keys)", port, port)
	if strings.Count(addr, ":") > 1 && !strings.HasPrefix(addr, "[") {
		next += fmt.Sprintf("; an IPv6 address goes in brackets: [::1]:%s", port)
	}
	return fmt.Sprintf("%q is not host:port. Next: %s", addr, next)
}

// ListenError is the start-up error of a listen on addr (TOOLSVC_ADDR)
// that failed with err. A port another program holds is the common case
// (a second toolsvc, a development server), and the bind error alone does
// not say what to do: this names the address, another port to use, and
// how to find the program that holds it.
func ListenError(addr string, err error) error {
	if !addrInUse(err) {
		return fmt.Errorf("%s_ADDR: %w", Prefix, err)
	}
	host, port, splitErr := net.SplitHostPort(addr)
	if splitErr != nil {
		return fmt.Errorf("%s_ADDR: %w", Prefix, err)
	}
	other := "8081"
	if n, perr := strconv.Atoi(port); perr == nil && n > 0 && n < 65535 {
		other = strconv.Itoa(n + 1)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return fmt.Errorf("%s_ADDR: %s is already in use by another program (%w). Next: choose another port, e.g. %s_ADDR=%s, or find the program that holds it: ss -ltnp 'sport = :%s' (lsof -nP -iTCP:%s -sTCP:LISTEN on macOS, netstat -ano | findstr :%s on Windows) and stop it",
		Prefix, addr, err, Prefix, net.JoinHostPort(host, other), port, port, port)
}

// wsaeAddrInUse is Windows' WSAEADDRINUSE, which syscall.EADDRINUSE (an
// errno of Unix) does not match there.
const wsaeAddrInUse = syscall.Errno(10048)

// addrInUse reports whether a listen failed because the address is taken.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, wsaeAddrInUse)
}
