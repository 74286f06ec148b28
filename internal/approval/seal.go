package approval

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Ticket is what a held call's sealed state carries between the rounds
// of an MCP multi round-trip request (its requestState): the approval
// the call waits on and what it was given for. The client holds it
// without being able to read or change it, and any replica sealing with
// the same key can take the call up again.
type Ticket struct {
	// ID is the approval's.
	ID string `json:"id"`
	// Key names the key whose call is held: a ticket is taken only from
	// that key.
	Key string `json:"key"`
	// Tool and ArgumentsSHA256 (Hash of the arguments as the client sent
	// them) name the call: a ticket is taken only with that call.
	Tool            string `json:"tool"`
	ArgumentsSHA256 string `json:"sha"`
	// ExpiresAt is when the ticket lapses: the approval's own expiry.
	ExpiresAt time.Time `json:"exp"`
}

// Errors of Sealer.Open.
var (
	// ErrSealBroken: the text is not a ticket this service sealed with
	// this key, whole and unchanged.
	ErrSealBroken = errors.New("the requestState was not sealed by this service with its current key, or was changed or cut")
	// ErrSealExpired: the ticket was sound but has lapsed.
	ErrSealExpired = errors.New("the requestState has expired")
)

// sealPrefix marks the format of a sealed ticket, so that a later format
// can be told apart; sealAD binds the ciphertext to this use, so that
// nothing else sealed under the same key passes for a ticket.
const (
	sealPrefix = "v1."
	sealAD     = "toolsvc approval ticket v1"
)

// SealKeyBytes is the size of a seal key: AES-256.
const SealKeyBytes = 32

// Sealer seals tickets with AES-256-GCM: encrypted, so that the client
// learns nothing it was not told, and authenticated, so that a changed,
// cut or forged ticket, or one sealed under another key, is refused.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer with key (SealKeyBytes bytes); an empty key
// is replaced by a random one, which no other process shares and a
// restart forgets (the client is then asked again).
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) == 0 {
		key = make([]byte, SealKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	if len(key) != SealKeyBytes {
		return nil, fmt.Errorf("a seal key has %d bytes, not %d", SealKeyBytes, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal returns t sealed as text safe in JSON and URLs, with a random
// nonce: two seals of one ticket differ.
func (s *Sealer) Seal(t Ticket) (string, error) {
	plain, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := s.aead.Seal(nonce, nonce, plain, []byte(sealAD))
	return sealPrefix + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// maxSealed bounds the text Open reads: a ticket is a few hundred bytes.
const maxSealed = 4096

// Open returns the ticket sealed in text, refusing one that is not
// whole, unchanged and sealed under this key (ErrSealBroken) or that has
// lapsed at now (ErrSealExpired). It says nothing of whose ticket it is
// or for which call: the caller compares Key, Tool and ArgumentsSHA256
// with the call at hand.
func (s *Sealer) Open(text string, now time.Time) (Ticket, error) {
	body, ok := strings.CutPrefix(text, sealPrefix)
	if !ok || len(text) > maxSealed {
		return Ticket{}, ErrSealBroken
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return Ticket{}, ErrSealBroken
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(sealAD))
	if err != nil {
		return Ticket{}, ErrSealBroken
	}
	var t Ticket
	if err := json.Unmarshal(plain, &t); err != nil || t.ID == "" || t.Tool == "" || t.ArgumentsSHA256 == "" {
		return Ticket{}, ErrSealBroken
	}
	if !now.Before(t.ExpiresAt) {
		return t, ErrSealExpired
	}
	return t, nil
}

// MayDecideOwn reports whether the key named key may decide the approval
// of a call it made itself: it must be an approver, and its policy must
// give it self_approve. An MCP client answering the service's question
// about its own call is that case.
func (s *Service) MayDecideOwn(key string) bool {
	if !s.Approver(key) || s.o.Rules == nil {
		return false
	}
	_, self := s.o.Rules(key)
	return self
}
