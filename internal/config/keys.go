package config

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// APIKey is one bearer key and the name it goes by. The name, never the
// key, is what the audit log, the log lines and the owner of a sub-agent
// task record.
type APIKey struct{ Name, Key string }

// APIKeys is a list of bearer keys: "key" or "name=key", separated by
// commas. A key given without a name is named after a short hash of it
// (KeyName), so that a bare key keeps one name across restarts.
type APIKeys []APIKey

// keyNamePattern is what a key may be called: it lands in log lines, audit
// records and task files, so it is short, plain text, and cannot be "." or
// "..".
var keyNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// ValidKeyName reports whether name may name a key.
func ValidKeyName(name string) bool { return keyNamePattern().MatchString(name) }

// KeyName is the name of a key given without one: "key-" and the first 8
// hex digits of its SHA-256, which identify the key in logs without
// revealing it.
func KeyName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(sum[:4])
}

// Decode implements Decoder. An entry is "name=key" when the text
// before its first "=" is a key name and some text that does not start
// with "=" follows; else it is a bare key (a base64 key ends in "=" or
// "=="). Errors never quote a key: they name entries by position or name.
func (k *APIKeys) Decode(v string) error {
	var out APIKeys
	for i, f := range splitList(v, ",") {
		key := APIKey{Name: KeyName(f), Key: f}
		if name, val, ok := strings.Cut(f, "="); ok && val != "" && !strings.HasPrefix(val, "=") {
			name, val = strings.TrimSpace(name), strings.TrimSpace(val)
			if !ValidKeyName(name) {
				return fmt.Errorf("entry %d: the text before '=' is not a key name (1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit); a key that holds '=' must be given as name=key", i+1)
			}
			key = APIKey{Name: name, Key: val}
		}
		out = append(out, key)
	}
	if err := out.checkUnique(); err != nil {
		return err
	}
	*k = out
	return nil
}

// checkUnique refuses two keys of one name and one key under two names.
func (k APIKeys) checkUnique() error {
	names := map[string]bool{}
	keys := map[string]string{}
	for _, x := range k {
		if names[x.Name] {
			return fmt.Errorf("the key name %q is given twice; every key needs its own name", x.Name)
		}
		names[x.Name] = true
		if other, dup := keys[x.Key]; dup {
			return fmt.Errorf("the keys named %q and %q are the same key; give each key once", other, x.Name)
		}
		keys[x.Key] = x.Name
	}
	return nil
}

// Names lists the keys' names.
func (k APIKeys) Names() []string {
	out := make([]string, len(k))
	for i, x := range k {
		out[i] = x.Name
	}
	return out
}

// String hides the keys.
func (k APIKeys) String() string { return fmt.Sprintf("[%d hidden]", len(k)) }

// validateKeys checks API_KEYS and ADMIN_KEYS together: every key long
// enough, and no name or key in both.
func (c Access) validateKeys(bad report) {
	for _, v := range []struct {
		name string
		keys APIKeys
	}{{"API_KEYS", c.APIKeys}, {"ADMIN_KEYS", c.AdminKeys}} {
		for _, k := range v.keys {
			if len(k.Key) < 16 {
				bad(v.name, "every key must be at least 16 characters long (the key named %q is not)", k.Name)
				break
			}
		}
	}
	all := append(append(APIKeys{}, c.APIKeys...), c.AdminKeys...)
	if err := all.checkUnique(); err != nil {
		bad("ADMIN_KEYS", "%v (across TOOLSVC_API_KEYS and TOOLSVC_ADMIN_KEYS; an admin key needs no entry in TOOLSVC_API_KEYS)", err)
	}
}

// validateApprovers checks APPROVER_KEYS against the keys' names, and
// APPROVAL_TTL and APPROVAL_SEAL_KEY.
func (c Access) validateApprovers(bad report) {
	names := append(c.APIKeys.Names(), c.AdminKeys.Names()...)
	for _, n := range c.ApproverKeys {
		if !slices.Contains(names, n) {
			msg := fmt.Sprintf("no key is named %q", n)
			if near := Nearest(n, names); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			bad("APPROVER_KEYS", "%s: name keys of TOOLSVC_API_KEYS or TOOLSVC_ADMIN_KEYS", msg)
		}
	}
	if c.ApprovalTTL < time.Minute || c.ApprovalTTL > 30*24*time.Hour {
		bad("APPROVAL_TTL", "%s is out of range: between 1m and 720h", c.ApprovalTTL)
	}
	if c.ApprovalSealKey != "" {
		if k, err := base64.StdEncoding.DecodeString(string(c.ApprovalSealKey)); err != nil || len(k) != 32 {
			bad("APPROVAL_SEAL_KEY", "must be 32 bytes in base64, as openssl rand -base64 32 writes them")
		}
	}
}
