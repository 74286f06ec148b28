package redact

import "testing"

func TestRedactor(t *testing.T) {
	r := New("short", "sk-secret-value-123", "sk-secret-value-123-longer")
	cases := []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"key=sk-secret-value-123!", "key=[REDACTED]!"},
		{"sk-secret-value-123-longer", "[REDACTED]"},
		{"a short word stays", "a short word stays"},
	}
	for _, c := range cases {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var nilR *Redactor
	if nilR.String("x") != "x" || New().String("sk-secret-value-123") != "sk-secret-value-123" {
		t.Error("empty redactor changed text")
	}
}
