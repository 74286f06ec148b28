package config

import (
	"strings"
	"testing"
)

// TestCORSOrigins: TOOLSVC_CORS_ORIGINS takes origins as browsers send
// them, or *, and names a value that is none.
func TestCORSOrigins(t *testing.T) {
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"", true},
		{"*", true},
		{"https://chat.example.com", true},
		{"http://localhost:3000, https://chat.example.com/", true},
		{"chat.example.com", false},
		{"https://chat.example.com/path", false},
		{"ftp://chat.example.com", false},
		{"https://user:pw@chat.example.com", false},
	} {
		cfg, err := LoadFrom(func(name string) (string, bool) {
			if name == Prefix+"_CORS_ORIGINS" {
				return tc.value, true
			}
			return "", false
		})
		if tc.ok != (err == nil) {
			t.Errorf("CORS_ORIGINS=%q: %v", tc.value, err)
		}
		if err != nil && !strings.Contains(err.Error(), "TOOLSVC_CORS_ORIGINS") {
			t.Errorf("CORS_ORIGINS=%q: the error does not name the variable: %v", tc.value, err)
		}
		if tc.value == "*" && (len(cfg.CORSOrigins) != 1 || cfg.CORSOrigins[0] != "*") {
			t.Errorf("CORS_ORIGINS=*: %q", cfg.CORSOrigins)
		}
	}
}
