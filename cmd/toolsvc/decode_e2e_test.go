package main

import (
	"strings"
	"testing"
)

// TestIntegralNumbersAccepted: models often write whole numbers as 2.0 or
// 3e0. JSON Schema counts them as integers, so the tools must take them.
func TestIntegralNumbersAccepted(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	s.writeWS(t, "n.txt", "one\ntwo\nthree\nfour\n")
	out := mustSucceed(t, s.invoke(t, "read_file", `{"path":"n.txt","start_line":2.0,"end_line":3e0}`))
	assertContains(t, "read_file result", out, "two", "three")
	if strings.Contains(out, "four") {
		t.Errorf("end_line 3e0 not honoured: %q", out)
	}
	mustFail(t, s.invoke(t, "read_file", `{"path":"n.txt","start_line":1e30}`), "invalid_arguments", "start_line must be <= 9223372036854775807")
}
