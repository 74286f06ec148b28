package config

import (
	"strings"
	"testing"
)

// TestCORSOrigins: TOOLSVC_CORS_ORIGINS takes origins as browsers send
// them, null, or * (with keys only), and names a value that is none.
func TestCORSOrigins(t *testing.T) {
	for _, tc := range []struct {
		value string
		keys  string
		ok    bool
	}{
		{"", "", true},
		{"*", "a-key-of-sixteen-chars", true},
		{"https://chat.example.com", "", true},
		{"http://localhost:3000, https://chat.example.com/", "", true},
		{"null", "", true},
		{"chat.example.com", "", false},
		{"https://chat.example.com/path", "", false},
		{"ftp://chat.example.com", "", false},
		{"https://user:pw@chat.example.com", "", false},
	} {
		cfg, err := LoadFrom(func(name string) (string, bool) {
			switch name {
			case Prefix + "_CORS_ORIGINS":
				return tc.value, true
			case Prefix + "_API_KEYS":
				return tc.keys, tc.keys != ""
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

// TestAnyOriginNeedsKeys: CORS_ORIGINS=* without keys would let every web
// page the user opens run commands; start-up stops and says what to set.
func TestAnyOriginNeedsKeys(t *testing.T) {
	for _, value := range []string{"*", "https://chat.example.com, *"} {
		_, err := LoadFrom(func(name string) (string, bool) {
			if name == Prefix+"_CORS_ORIGINS" {
				return value, true
			}
			return "", false
		})
		if err == nil {
			t.Fatalf("CORS_ORIGINS=%q without keys was accepted", value)
		}
		for _, want := range []string{"TOOLSVC_CORS_ORIGINS", "every web page", "TOOLSVC_API_KEYS", "https://chat.example.com"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("CORS_ORIGINS=%q: the error lacks %q: %v", value, want, err)
			}
		}
	}
}

// TestAllowedHosts: TOOLSVC_ALLOWED_HOSTS takes host names as a Host
// header names them, without port, and names a value that is none.
func TestAllowedHosts(t *testing.T) {
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"", true},
		{"toolsvc.example.com", true},
		{"toolsvc.example.com., TOOLSVC.internal", true},
		{"*.corp.example", true},
		{"my_host", true},
		{"10.0.0.5, fd00::1, [fd00::2]", true},
		{"toolsvc.example.com:8080", false},
		{"http://toolsvc.example.com", false},
		{"toolsvc.example.com/path", false},
		{"*", false},
		{"foo.*.example", false},
		{"-bad.example", false},
		{"a..b", false},
		{"[fd00::1", false},
		{"fe80::1%eth0", false},
	} {
		cfg, err := LoadFrom(func(name string) (string, bool) {
			if name == Prefix+"_ALLOWED_HOSTS" {
				return tc.value, true
			}
			return "", false
		})
		if tc.ok != (err == nil) {
			t.Errorf("ALLOWED_HOSTS=%q: %v", tc.value, err)
		}
		if err != nil && !strings.Contains(err.Error(), "TOOLSVC_ALLOWED_HOSTS") {
			t.Errorf("ALLOWED_HOSTS=%q: the error does not name the variable: %v", tc.value, err)
		}
		if tc.ok && tc.value != "" && len(cfg.AllowedHosts) == 0 {
			t.Errorf("ALLOWED_HOSTS=%q: nothing loaded", tc.value)
		}
	}
}
