package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Digest is one line of a chain's digest file: where the chain stood at
// Time, tied to the digest before it, and signed. The signature (Sig,
// base64) is over the line's bytes without its sig member: the line up to
// `,"sig":"`, then "}". Without a signing key a digest is written unsigned
// (no key, no sig): it still ties the chain's end to the digests before
// it, which tells a log cut short at its end from a whole one, but anyone
// who can write the folder can rewrite it too.
type Digest struct {
	Chain string    `json:"chain"` // the replica
	N     uint64    `json:"n"`     // 1, 2, ... in the chain's digests
	Time  time.Time `json:"time"`
	Seq   uint64    `json:"seq"`  // the chain's last record: 0 before the first
	Hash  string    `json:"hash"` // its SHA-256 in hex (genesisHash for seq 0)
	// PrevSig is the signature of digest N-1, PrevDigest the SHA-256 of
	// its whole line (which covers an unsigned one too).
	PrevSig    string `json:"prev_sig,omitempty"`
	PrevDigest string `json:"prev_digest,omitempty"`
	// Cut is what retention deleted since the last digest.
	Cut *Cut   `json:"cut,omitempty"`
	Key string `json:"key,omitempty"` // the signer's Ed25519 public key, base64
	Sig string `json:"sig,omitempty"`
}

// Cut is the day folders retention deleted, and the records they held, as
// runs of consecutive seqs per chain: a verifier takes a hole in a chain
// that runs cover for deletion by retention, and checks the record after a
// run against the run's last hash.
type Cut struct {
	Days []string `json:"days"`
	Runs []CutRun `json:"runs,omitempty"`
	// Unchained counts records without a seq (written before the chain).
	Unchained int `json:"unchained,omitempty"`
}

// CutRun is the records First..Last of a chain, all deleted.
type CutRun struct {
	Chain    string `json:"chain"`
	First    uint64 `json:"first"`
	Last     uint64 `json:"last"`
	LastHash string `json:"last_hash"`
}

// digestState is what the next digest of a chain ties to.
type digestState struct {
	has  bool
	n    uint64
	seq  uint64
	hash [32]byte
	sig  string
	line [32]byte // SHA-256 of the digest's line
}

// digestFiles lists a chain folder's digest files, oldest first.
func digestFiles(dir string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "digests-*.jsonl"))
	sort.Strings(names)
	return names, err
}

// lastDigest reads the newest digest of a chain folder.
func lastDigest(dir string) (digestState, error) {
	names, err := digestFiles(dir)
	if err != nil {
		return digestState{}, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		data, err := os.ReadFile(names[i])
		if err != nil {
			return digestState{}, err
		}
		lines := bytes.SplitAfter(data, []byte("\n"))
		for j := len(lines) - 1; j >= 0; j-- {
			var d Digest
			if json.Unmarshal(lines[j], &d) != nil || d.N == 0 {
				continue // a line cut short: the verifier reports it
			}
			h, err := parseHash(d.Hash)
			if err != nil {
				continue
			}
			return digestState{has: true, n: d.N, seq: d.Seq, hash: h, sig: d.Sig, line: sha256.Sum256(lines[j])}, nil
		}
	}
	return digestState{}, nil
}

// addCut notes a cut for the next digest.
func (c *chain) addCut(cut Cut) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.pending == nil {
		c.pending = &Cut{}
	}
	c.pending.Days = append(c.pending.Days, cut.Days...)
	c.pending.Runs = append(c.pending.Runs, cut.Runs...)
	c.pending.Unchained += cut.Unchained
}

// writeDigest appends a digest of the chain's state to the digest file of
// now's day, unless nothing changed since the last one. Like a record it
// is not synced to the disk.
func (c *chain) writeDigest(now time.Time, key ed25519.PrivateKey) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	seq, hash := c.state()
	if c.pending == nil && (seq == c.digest.seq && (c.digest.has || seq == 0)) {
		return nil
	}
	d := Digest{Chain: c.name, N: c.digest.n + 1, Time: now.UTC(), Seq: seq, Hash: hex.EncodeToString(hash[:]), Cut: c.pending}
	if c.digest.has {
		d.PrevSig, d.PrevDigest = c.digest.sig, hex.EncodeToString(c.digest.line[:])
	}
	if key != nil {
		d.Key = base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	}
	line, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if key != nil {
		d.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, line))
		line = append(line[:len(line)-1], `,"sig":"`+d.Sig+`"}`...)
	}
	line = append(line, '\n')
	path := filepath.Join(c.dir, "digests-"+dayOf(now)+".jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("audit digest: %w", err)
	}
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit digest: %w", err)
	}
	c.digest = digestState{has: true, n: d.N, seq: seq, hash: hash, sig: d.Sig, line: sha256.Sum256(line)}
	c.pending = nil
	return nil
}

// SplitSigned returns the bytes a digest line's signature is over and the
// signature, or ok false when the line has none.
func SplitSigned(line []byte) (payload, sig []byte, ok bool) {
	line = bytes.TrimRight(line, "\n")
	i := bytes.LastIndex(line, []byte(`,"sig":"`))
	if i < 0 || !bytes.HasSuffix(line, []byte(`"}`)) {
		return nil, nil, false
	}
	sig, err := base64.StdEncoding.DecodeString(string(line[i+len(`,"sig":"`) : len(line)-2]))
	if err != nil {
		return nil, nil, false
	}
	return append(slices.Clip(line[:i]), '}'), sig, true
}

func parsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PKCS#8 PEM private key (openssl genpkey -algorithm ed25519 -out FILE)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("not a PKCS#8 private key")
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("not an Ed25519 key (openssl genpkey -algorithm ed25519)")
	}
	return key, nil
}

// PublicKey reads an Ed25519 public key from a PEM file, as "openssl pkey
// -in KEY -pubout" writes it.
func PublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	switch {
	case block == nil:
		return nil, fmt.Errorf("%s: not a PEM file", path)
	case strings.Contains(block.Type, "PRIVATE"):
		return nil, fmt.Errorf("%s is a private key: give its public half (openssl pkey -in %s -pubout -out audit.pub)", path, path)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 public key", path)
	}
	return pub, nil
}

// readLines calls fn with each line of a file, newline included (the last
// one may lack it).
func readLines(path string, fn func(line []byte)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			fn(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
