package approval

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustSealer(t *testing.T, key []byte) *Sealer {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSealRoundTrip: a sealed ticket opens to what was sealed, until it
// lapses; two seals of one ticket differ (the nonce is random).
func TestSealRoundTrip(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	s := mustSealer(t, bytes.Repeat([]byte{7}, SealKeyBytes))
	tk := Ticket{ID: "ap-1", Key: "alice", Tool: "exec", ArgumentsSHA256: strings.Repeat("a", 64), ExpiresAt: now.Add(time.Hour)}
	a, err := s.Seal(tk)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Seal(tk)
	if a == b {
		t.Error("two seals of one ticket are the same text")
	}
	if strings.Contains(a, "alice") || strings.Contains(a, "exec") || strings.Contains(a, "ap-1") {
		t.Errorf("the sealed text shows what it carries: %s", a)
	}
	got, err := s.Open(a, now)
	if err != nil || got != tk {
		t.Fatalf("Open = %+v, %v; want %+v", got, err, tk)
	}
	// Another replica with the same key opens it.
	if got, err := mustSealer(t, bytes.Repeat([]byte{7}, SealKeyBytes)).Open(b, now); err != nil || got != tk {
		t.Errorf("another sealer with the same key: %+v, %v", got, err)
	}
	if _, err := s.Open(a, tk.ExpiresAt); !errors.Is(err, ErrSealExpired) {
		t.Errorf("Open at the expiry: %v, want ErrSealExpired", err)
	}
}

// TestSealRefuses: nothing but a whole, unchanged ticket sealed under the
// same key opens.
func TestSealRefuses(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	key := bytes.Repeat([]byte{1}, SealKeyBytes)
	s := mustSealer(t, key)
	tk := Ticket{ID: "ap-1", Key: "alice", Tool: "exec", ArgumentsSHA256: strings.Repeat("b", 64), ExpiresAt: now.Add(time.Hour)}
	good, err := s.Seal(tk)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(good, sealPrefix))
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return sealPrefix + base64.RawURLEncoding.EncodeToString(b)
	}
	// Re-sealed: the same ticket, or one naming another key, sealed under
	// a key of the attacker's choosing.
	other := mustSealer(t, bytes.Repeat([]byte{2}, SealKeyBytes))
	resealed, _ := other.Seal(tk)
	bob := tk
	bob.Key = "bob"
	forgedBob, _ := other.Seal(bob)
	// A random key (an empty seal key) is another key too.
	random := mustSealer(t, nil)
	fromRandom, _ := random.Seal(tk)
	// Sealed under the key but for another use (other associated data).
	otherUse := sealPrefix + base64.RawURLEncoding.EncodeToString(func() []byte {
		nonce := make([]byte, s.aead.NonceSize())
		return s.aead.Seal(nonce, nonce, []byte(`{"id":"ap-1","key":"alice","tool":"exec","sha":"x","exp":"2030-01-01T00:00:00Z"}`), []byte("something else"))
	}())
	cases := map[string]string{
		"empty":               "",
		"no prefix":           strings.TrimPrefix(good, sealPrefix),
		"another version":     "v2." + strings.TrimPrefix(good, sealPrefix),
		"not base64":          sealPrefix + "!!!",
		"padding":             good + "==",
		"truncated":           good[:len(good)-1],
		"truncated to nonce":  sealPrefix + base64.RawURLEncoding.EncodeToString(raw[:12]),
		"cut in half":         good[:len(good)/2],
		"a bit flipped (tag)": flip(len(raw) - 1),
		"a bit flipped (msg)": flip(20),
		"nonce changed":       flip(0),
		"forged plain JSON":   sealPrefix + base64.RawURLEncoding.EncodeToString([]byte(`{"id":"ap-1","key":"alice","tool":"exec","sha":"x","exp":"2030-01-01T00:00:00Z"}`)),
		"re-sealed":           resealed,
		"forged for bob":      forgedBob,
		"other key (random)":  fromRandom,
		"other use":           otherUse,
		"appended":            good + "AAAA",
		"huge":                sealPrefix + strings.Repeat("A", 10000),
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := s.Open(text, now); !errors.Is(err, ErrSealBroken) {
				t.Errorf("Open = %+v, %v; want ErrSealBroken", got, err)
			}
		})
	}
	if _, err := NewSealer(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key was taken")
	}
}
