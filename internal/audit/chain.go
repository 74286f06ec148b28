package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// The chain. Every final record of a replica carries seq, its place in
// the replica's chain (1, 2, ... in the order records were finished), and
// prev, the SHA-256 of the previous record's bytes: the whole file of the
// record seq-1 as it was written, newline included (the same bytes as its
// line on Options.Stdout). The first record's prev is genesisHash.
//
// The chain's state lives in chainDir/<chain>/: a head file, rewritten in
// place after every record (a copy into its shared mapping, no fsync: it
// outlives the process as the records do, not a power cut), so that the
// next process of the
// replica goes on from the last record after a crash; and the digests,
// one JSON line each, in a file per day. The head file is locked for as
// long as a process writes the chain, so two processes never write one
// chain, and a dead process's chain can be finished by another.

// chainDir, under the audit folder, holds a folder per chain.
const chainDir = "chain"

// genesisHash is the prev of a chain's first record.
const genesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// sealRoom is the room Finish leaves before a record's JSON for the seq
// and prev that go in front of it once its place in the chain is known:
// {"seq":<20 digits>,"prev":"<64 hex>".
const sealRoom = len(`{"seq":`) + 20 + len(`,"prev":"`) + 64 + len(`"`)

// chainFolder is the folder of a chain's head and digests: the replica's
// name escaped so that any name is one folder name, and none is empty.
func chainFolder(auditDir, name string) string {
	return filepath.Join(auditDir, chainDir, "r-"+url.QueryEscape(name))
}

// chain is one replica's chain as a process writes it.
type chain struct {
	name string
	dir  string
	log  *Log

	mu       sync.Mutex // orders the records: seq, prev, the file, the line on stdout
	head     *os.File   // locked while the chain is held
	hw       *headWriter
	seq      uint64
	hash     [32]byte // of the record seq (genesis when seq is 0)
	prevHash [32]byte // of the record seq-1, to step back to
	closed   bool

	dmu     sync.Mutex // one digest at a time
	digest  digestState
	pending *Cut // cuts not yet in a digest
}

// errChainBusy says a live process writes the chain.
var errChainBusy = errors.New("another live process writes this replica's audit chain (each replica needs its own TOOLSVC_REPLICA_ID)")

// openChain takes the chain of replica name: it locks its head file and
// finds where it ends, from the head file and the last digest.
func (l *Log) openChain(name string) (*chain, error) {
	c := &chain{name: name, dir: chainFolder(l.opts.Dir, name), log: l}
	if err := os.MkdirAll(c.dir, 0o750); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.dir, "head"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, false); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, errChainBusy
		}
		return nil, err
	}
	c.head = f
	c.hash = mustHash(genesisHash)
	c.prevHash = c.hash
	if err := c.load(); err != nil {
		f.Close()
		return nil, err
	}
	if c.hw, err = newHeadWriter(f); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// load reads the head file and the last digest. A record the head names
// but that never appeared (the process died between the two writes) is
// not part of the chain: the chain goes on from the one before.
func (c *chain) load() error {
	if h, ok := readHeadFile(c.head.Name()); ok && h.Seq > 0 {
		c.seq, c.hash, c.prevHash = h.Seq, h.Hash, h.Prev
		if h.File != "" && !c.log.files.exists(h.File) {
			c.seq, c.hash = h.Seq-1, h.Prev
		}
	}
	d, err := lastDigest(c.dir)
	if err != nil {
		return fmt.Errorf("audit: chain %q: %w", c.name, err)
	}
	c.digest = d
	// The head file lost or older than the last digest: the digest says
	// where the chain ended.
	if d.seq > c.seq {
		c.seq, c.hash = d.seq, d.hash
	}
	return nil
}

// seal gives the record encoded in buf[sealRoom:] (it starts with '{')
// the next place in the chain, writes its file under day/name, and its
// line on stdout. It returns the record's bytes. When the file cannot be
// written the chain is left as it was: the record has no place in it,
// and gets one when it is written later (reconciliation).
//
// The record's file is made before the lock is taken (files.reserve):
// under it, only what fixes the order is done, the head, the record's
// bytes into that file and its link.
func (c *chain) seal(buf []byte, day, name string, ifAbsent bool) ([]byte, error) {
	fd := c.log.files.reserve(day)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.log.files.unreserve(fd)
		return nil, errClosed
	}
	seq := c.seq + 1
	var pre [sealRoom]byte
	p := append(pre[:0], `{"seq":`...)
	p = strconv.AppendUint(p, seq, 10)
	p = append(p, `,"prev":"`...)
	p = hex.AppendEncode(p, c.hash[:])
	p = append(p, '"')
	start := sealRoom - len(p)
	copy(buf[start:], p)
	buf[sealRoom] = ','
	data := buf[start:]
	sum := sha256.Sum256(data)
	// day and name are clean names (recordName): joined without Clean.
	rel := day + string(filepath.Separator) + name
	err := c.writeHead(seq, sum, c.hash, rel)
	if err == nil {
		err = c.log.fault("record")
	}
	if err == nil {
		err = c.log.files.placeIn(day, name, data, ifAbsent, fd)
	} else {
		c.log.files.unreserve(fd)
	}
	if err != nil {
		buf[sealRoom] = '{'
		// The head names a record that is not there: the next start
		// steps back, and the next record takes the same seq and slot.
		return nil, err
	}
	c.seq, c.prevHash, c.hash = seq, c.hash, sum
	c.log.toStdout(data)
	return data, nil
}

// writeHead notes in the head file that record seq, of the given hash,
// is the chain's last.
func (c *chain) writeHead(seq uint64, hash, prev [32]byte, file string) error {
	if err := c.hw.write(headState{Seq: seq, Hash: hash, Prev: prev, File: file}); err != nil {
		return fmt.Errorf("audit chain head: %w", err)
	}
	return nil
}

// state returns the chain's last seq and its hash.
func (c *chain) state() (uint64, [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq, c.hash
}

// close ends the chain's writing and releases its lock; records finished
// later find it closed and go to the journal.
func (c *chain) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.hw.close()
		c.head.Close()
	}
}

func parseHash(s string) ([32]byte, error) {
	var h [32]byte
	if len(s) != 64 {
		return h, errors.New("not a SHA-256 in hex")
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err
}

func mustHash(s string) [32]byte {
	h, err := parseHash(s)
	if err != nil {
		panic(err)
	}
	return h
}

// SigningKey reads an Ed25519 private key from a PKCS#8 PEM file, as
// "openssl genpkey -algorithm ed25519" writes it. Errors name the file,
// never its content.
func SigningKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit signing key: %w", err)
	}
	key, err := parsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("audit signing key %s: %w", path, err)
	}
	return key, nil
}
