package redact

import (
	"strings"
	"testing"
)

// FuzzProgress cuts a text holding secrets into events at arbitrary places:
// what the listener receives, joined, must be exactly the text redacted in
// one piece, so no secret slips through between two events.
func FuzzProgress(f *testing.F) {
	f.Add("sk-0123456789", `tok"en\value`, "out sk-0123456789 and sk-01234 then tok\"en\\value", []byte{3, 9, 1, 20})
	f.Add("aaaaaaaab", "aaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaab", []byte{4, 4, 4})
	f.Add("abcdefgh", "bcdefghi", "abcdefghi bcdefghi", []byte{1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, s1, s2, text string, cuts []byte) {
		r := New(s1, s2)
		var got strings.Builder
		send, flush := r.Progress(func(event, data string) {
			if event != "output" {
				t.Fatalf("event %q", event)
			}
			got.WriteString(data)
		})
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			send("output", rest[:n])
			rest = rest[n:]
		}
		send("output", rest)
		flush()
		if want := r.String(text); got.String() != want {
			t.Fatalf("events joined %q, want %q", got.String(), want)
		}
	})
}
