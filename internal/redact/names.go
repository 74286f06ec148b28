package redact

import (
	"strings"
	"unicode"
)

// secretWords are the words that make a name secret-looking when they stand
// alone in it ("db_password", "X-Api-Key", "accessToken"). "key", "pass" and
// "auth" count only as whole words: inside a word they are mostly something
// else (keywords, passage, author).
var secretWords = map[string]bool{
	"key": true, "keys": true, "apikey": true, "apikeys": true,
	"token": true, "tokens": true,
	"secret": true, "secrets": true,
	"password": true, "passwords": true, "pass": true, "passwd": true, "pwd": true, "passphrase": true,
	"credential": true, "credentials": true, "creds": true,
	"auth": true, "authorization": true,
	"cookie": true, "cookies": true,
}

// secretParts are found anywhere in a name, separators removed
// ("dbpassword", "accesstoken", "myapikey"): they are rare inside ordinary
// words.
var secretParts = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "apikey", "authorization", "cookie", "privatekey", "accesskey"}

// SecretName reports whether an argument, header or field name looks like
// it holds a secret: key, token, secret, password, pass, passwd,
// credential(s), api_key, apikey, access_token, auth, authorization, cookie,
// alone or with other words around them (db_password, X-Api-Key, apiKey).
// The audit record blanks the values of such arguments.
func SecretName(name string) bool {
	if name == "" {
		return false
	}
	for _, w := range words(name) {
		if secretWords[w] {
			return true
		}
	}
	joined := strings.Map(func(c rune) rune {
		if unicode.IsLetter(c) || unicode.IsDigit(c) {
			return unicode.ToLower(c)
		}
		return -1
	}, name)
	for _, p := range secretParts {
		if strings.Contains(joined, p) {
			return true
		}
	}
	return false
}

// MentionsSecretName is a quick test on raw JSON (or any text): false means
// no name in it can be secret-looking, so a caller may skip decoding it.
// True may be a false alarm. A \u escape counts as a mention, since it may
// spell a name ("p\u0061ssword"). It does not allocate.
func MentionsSecretName(b []byte) bool {
	// One pass, looking at the rest only after a byte that can start a
	// mention: this runs on every call's arguments.
	for i, c := range b {
		rest := b[i:]
		switch lowerASCII(c) {
		case '\\':
			if len(rest) > 1 && rest[1] == 'u' {
				return true
			}
		case 'k':
			if hasPrefixFold(rest, "key") {
				return true
			}
		case 'p':
			if hasPrefixFold(rest, "pass") || hasPrefixFold(rest, "pwd") {
				return true
			}
		case 's':
			if hasPrefixFold(rest, "secret") {
				return true
			}
		case 't':
			if hasPrefixFold(rest, "token") {
				return true
			}
		case 'c':
			if hasPrefixFold(rest, "cred") || hasPrefixFold(rest, "cookie") {
				return true
			}
		case 'a':
			if hasPrefixFold(rest, "auth") {
				return true
			}
		}
	}
	return false
}

// hasPrefixFold reports whether b starts with p (lower-case ASCII) in any
// case.
func hasPrefixFold(b []byte, p string) bool {
	if len(b) < len(p) {
		return false
	}
	for j := 0; j < len(p); j++ {
		if lowerASCII(b[j]) != p[j] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// words splits a name into lower-case words at anything that is not a
// letter or digit and where a lower-case letter or digit meets an upper-case one
// (apiKey, XApiKey: x, api, key).
func words(name string) []string {
	var out []string
	var cur []rune
	end := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, c := range rs {
		switch {
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			end()
			continue
		case unicode.IsUpper(c) && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])):
			end()
		case unicode.IsUpper(c) && i > 0 && unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			// "XApiKey": the A starts a new word.
			end()
		}
		cur = append(cur, c)
	}
	end()
	return out
}

// variableSuffixes end the names of configuration variables whose values are
// secrets.
var variableSuffixes = []string{"KEY", "KEYS", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "CREDENTIAL", "CREDENTIALS"}

// SecretVariable reports whether an environment variable's name says its
// value is a secret: it ends in _KEY, _TOKEN, _SECRET or _PASSWORD (or their
// plurals, _PASSWD, _CREDENTIAL(S)), in any case. TOOLSVC_API_KEYS,
// TOOLSVC_LLM_API_KEY and TOOLSVC_TELEGRAM_TOKEN are; TOOLSVC_LLM_API_KEY_FILE
// (a path) is not.
func SecretVariable(name string) bool {
	up := strings.ToUpper(name)
	for _, s := range variableSuffixes {
		if up == s || strings.HasSuffix(up, "_"+s) {
			return true
		}
	}
	return false
}
