package childenv

import (
	"slices"
	"testing"
)

func TestAllowed(t *testing.T) {
	extra := []string{"MYAPP_*", "GOPATH"}
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"PATH", true}, {"LANG", true}, {"LC_ALL", true}, {"TZ", true}, {"TERM", true},
		{"MYAPP_MODE", true}, {"GOPATH", true}, {"GOPATHX", false},
		{"TOOLSVC_API_KEYS", false}, {"HOME", false}, {"TMPDIR", false},
		{"OPENAI_API_KEY", false}, {"AWS_SECRET_ACCESS_KEY", false},
	} {
		if got := Allowed(tt.name, extra); got != tt.want {
			t.Errorf("Allowed(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFrom(t *testing.T) {
	env := []string{"PATH=/bin", "OPENAI_API_KEY=sk-x", "LANG=C", "TOOLSVC_API_KEYS=k", "broken"}
	if got, want := From(env, nil, nil), []string{"PATH=/bin", "LANG=C"}; !slices.Equal(got, want) {
		t.Errorf("From = %q, want %q", got, want)
	}
	if got, want := From([]string{"LANG=C"}, nil, nil), []string{"LANG=C", DefaultPath}; !slices.Equal(got, want) {
		t.Errorf("without PATH: %q, want %q", got, want)
	}
	// Names the caller sets itself are left out, PATH included, and no
	// default PATH is added then.
	own := func(n string) bool { return n == "PATH" || n == "LANG" }
	if got := From(env, nil, own); len(got) != 0 {
		t.Errorf("with own PATH and LANG: %q, want none", got)
	}
}
