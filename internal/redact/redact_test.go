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

func TestHold(t *testing.T) {
	r := New("sk-secret-value-123")
	cases := []struct {
		in   string
		want int
	}{
		{"nothing", 0},
		{"key=sk-sec", 6},
		{"key=s", 1},
		{"key=sk-secret-value-12", 18},
		{"key=sk-secret-value-123", 0}, // whole: replaced, nothing to wait for
		{"", 0},
	}
	for _, c := range cases {
		if got := r.Hold(c.in); got != c.want {
			t.Errorf("Hold(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	var nilR *Redactor
	if nilR.Hold("sk-sec") != 0 || New().Hold("sk-sec") != 0 {
		t.Error("empty redactor holds text back")
	}
}
