package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestAPIKeysDecode(t *testing.T) {
	const k1, k2 = "first-key-0123456789", "second-key-0123456789"
	cases := []struct {
		name    string
		value   string
		want    APIKeys
		wantErr string
	}{
		{"empty", "", nil, ""},
		{"bare", k1, APIKeys{{KeyName(k1), k1}}, ""},
		{"named", "alice=" + k1 + ", bob = " + k2, APIKeys{{"alice", k1}, {"bob", k2}}, ""},
		{"mixed", k1 + ",ci.bot_2=" + k2, APIKeys{{KeyName(k1), k1}, {"ci.bot_2", k2}}, ""},
		{"base64 padding is a bare key", "c2VjcmV0LWtleS0wMTIzNDU2=", APIKeys{{KeyName("c2VjcmV0LWtleS0wMTIzNDU2="), "c2VjcmV0LWtleS0wMTIzNDU2="}}, ""},
		{"double padding", "c2VjcmV0LWtleS0wMTIzNDU==", APIKeys{{KeyName("c2VjcmV0LWtleS0wMTIzNDU=="), "c2VjcmV0LWtleS0wMTIzNDU=="}}, ""},
		{"named key holding =", "svc=abc=def-0123456789", APIKeys{{"svc", "abc=def-0123456789"}}, ""},
		{"bad name", "no good=" + k1, nil, "entry 1: the text before '=' is not a key name"},
		{"dot name", ".=" + k1, nil, "not a key name"},
		{"dotdot name", "..=" + k1, nil, "not a key name"},
		{"long name", strings.Repeat("n", 65) + "=" + k1, nil, "not a key name"},
		{"duplicate name", "a=" + k1 + ",a=" + k2, nil, `the key name "a" is given twice`},
		{"duplicate key", "a=" + k1 + ",b=" + k1, nil, `the keys named "a" and "b" are the same key`},
		{"duplicate bare key", k1 + "," + k1, nil, "given twice"},
		{"bare named like a named one", "a=" + k1 + "," + KeyName(k2) + "=" + k1, nil, "are the same key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got APIKeys
			err := got.Decode(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				for _, k := range []string{k1, k2} {
					if strings.Contains(err.Error(), k) {
						t.Errorf("the error shows a key: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", []APIKey(got), []APIKey(tc.want))
			}
			if s := fmt.Sprint(got); strings.Contains(s, "key-0123") {
				t.Errorf("String shows a key: %s", s)
			}
		})
	}
}

func TestKeyName(t *testing.T) {
	n := KeyName("first-key-0123456789")
	if !ValidKeyName(n) || len(n) != len("key-")+8 || n != KeyName("first-key-0123456789") || n == KeyName("first-key-0123456780") {
		t.Errorf("KeyName: %q", n)
	}
}

// TestValidateKeys: short keys, and a name or key in both API_KEYS and
// ADMIN_KEYS, stop start-up with a message that names the variable and
// never shows a key.
func TestValidateKeys(t *testing.T) {
	const k1, k2 = "first-key-0123456789", "second-key-0123456789"
	cases := []struct {
		name       string
		api, admin string
		want       string // "" : valid
	}{
		{"api only", "a=" + k1, "", ""},
		{"admin only", "", "root=" + k1, ""},
		{"both", "a=" + k1, "root=" + k2, ""},
		{"short", "a=short-key", "", "TOOLSVC_API_KEYS: every key must be at least 16 characters long (the key named \"a\" is not)"},
		{"short admin", "", "root=short", "TOOLSVC_ADMIN_KEYS: every key must be at least 16"},
		{"same name", "a=" + k1, "a=" + k2, `TOOLSVC_ADMIN_KEYS: the key name "a" is given twice`},
		{"same key", "a=" + k1, "root=" + k1, `the keys named "a" and "root" are the same key`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"TOOLSVC_API_KEYS": tc.api, "TOOLSVC_ADMIN_KEYS": tc.admin}
			_, err := LoadFrom(func(n string) (string, bool) { v, ok := vars[n]; return v, ok })
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			for _, k := range []string{k1, k2, "short-key"} {
				if strings.Contains(err.Error(), k) {
					t.Errorf("the error shows a key: %v", err)
				}
			}
		})
	}
}

// TestBadSecretNotRepeated: a value that cannot be decoded is quoted in
// the error, unless it holds secrets.
func TestBadSecretNotRepeated(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"API_KEYS", "a=first-key-0123456789,a=second-key-0123456789"},
		{"ADMIN_KEYS", "bad name=first-key-0123456789"},
		{"WEBHOOK_URL", "ops=https://h.example/first-key-0123456789,ops=https://h.example/x"},
	} {
		_, err := LoadFrom(mapLookup(map[string]string{tc.name: tc.value}))
		if err == nil || !strings.Contains(err.Error(), "TOOLSVC_"+tc.name+" is not a valid") || strings.Contains(err.Error(), "first-key") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
