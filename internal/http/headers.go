package http

import "net/http"

// header returns the first value of a request header. The name must be
// spelled as net/http stores names ("X-Request-Id", not "X-Request-ID"):
// it is looked up as it is, without the conversion Header.Get makes on
// every call, which costs more than the lookup on the path every call
// takes. TestHeaderNamesCanonical checks every name passed here.
func header(h http.Header, canonicalName string) string {
	if v := h[canonicalName]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// setHeader sets a response header, its name spelled as for header.
func setHeader(h http.Header, canonicalName, value string) {
	h[canonicalName] = []string{value}
}
