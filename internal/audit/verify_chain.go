package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// chainView is what the digests and the head file say of one chain.
type chainView struct {
	name    string
	claims  map[uint64]claim // seq -> what a digest sealed
	last    uint64           // the highest seq sealed
	runs    []CutRun         // runs retention cut, from any chain's digests
	head    uint64           // the head file's last record (not signed)
	hasHead bool
}

type claim struct {
	hash [32]byte
	when time.Time
}

// readChains reads every chain folder: its head file and its digests,
// checking each digest's signature and its tie to the one before.
func readChains(dir string, pub ed25519.PublicKey, rep *Report) (map[string]*chainView, error) {
	views := map[string]*chainView{}
	view := func(name string) *chainView {
		v := views[name]
		if v == nil {
			v = &chainView{name: name, claims: map[uint64]claim{}}
			views[name] = v
		}
		return v
	}
	folders, err := filepath.Glob(filepath.Join(dir, chainDir, "r-*"))
	if err != nil {
		return nil, err
	}
	for _, folder := range folders {
		name, err := url.QueryUnescape(strings.TrimPrefix(filepath.Base(folder), "r-"))
		if err != nil {
			continue
		}
		v := view(name)
		readHead(dir, folder, v)
		if err := readDigestChain(folder, v, view, pub, rep); err != nil {
			return nil, err
		}
	}
	for _, v := range views {
		sort.Slice(v.runs, func(i, j int) bool { return v.runs[i].First < v.runs[j].First })
	}
	return views, nil
}

// readHead reads where the head file says the chain ends, as a process
// taking the chain over would.
func readHead(dir, folder string, v *chainView) {
	h, ok := readHeadFile(filepath.Join(folder, "head"))
	if !ok {
		return
	}
	v.head, v.hasHead = h.Seq, true
	if _, err := os.Lstat(filepath.Join(dir, h.File)); h.Seq > 0 && h.File != "" && err != nil {
		v.head--
	}
}

// digestCursor is the digest before the one being checked.
type digestCursor struct {
	prev     *Digest
	prevLine []byte
	signed   bool // a digest of the chain was signed by the key
	where    string
}

// readDigestChain checks a chain's digests in order.
func readDigestChain(folder string, v *chainView, view func(string) *chainView, pub ed25519.PublicKey, rep *Report) error {
	files, err := digestFiles(folder)
	if err != nil {
		return err
	}
	var cur digestCursor
	bad := func(kind, format string, args ...any) {
		rep.Problems = append(rep.Problems, Problem{Kind: kind, Chain: v.name, File: cur.where, Detail: fmt.Sprintf(format, args...)})
	}
	for _, file := range files {
		rel, _ := filepath.Rel(filepath.Dir(filepath.Dir(folder)), file)
		n := 0
		err := readLines(file, func(line []byte) {
			n++
			rep.Digests++
			cur.where = fmt.Sprintf("%s line %d", filepath.ToSlash(rel), n)
			d := checkDigest(line, &cur, v.name, pub, rep, bad)
			if d == nil {
				return
			}
			v.claims[d.Seq] = claim{hash: mustHashOr(d.Hash), when: d.Time}
			v.last = max(v.last, d.Seq)
			if d.Cut != nil {
				for _, r := range d.Cut.Runs {
					view(r.Chain).runs = append(view(r.Chain).runs, r)
					rep.Cut += r.Last - r.First + 1
				}
			}
			cur.prev, cur.prevLine = d, line
		})
		if err != nil {
			return err
		}
	}
	if pub != nil && cur.prev != nil && !cur.signed {
		bad(KindBadSignature, "no digest of chain %q is signed by the key given", v.name)
	}
	return nil
}

// checkDigest parses one digest line and checks it against the one
// before; it returns nil for a line that is no digest.
func checkDigest(line []byte, cur *digestCursor, chain string, pub ed25519.PublicKey, rep *Report, bad func(kind, format string, args ...any)) *Digest {
	var d Digest
	if err := json.Unmarshal(line, &d); err != nil || d.N == 0 {
		if !strings.HasSuffix(string(line), "\n") {
			bad(KindTruncated, "the digest is cut short")
		} else {
			bad(KindEdited, "the line is no digest")
		}
		return nil
	}
	if payload, sig, ok := SplitSigned(line); ok {
		key := pub
		if key == nil {
			k, err := base64.StdEncoding.DecodeString(d.Key)
			if err == nil && len(k) == ed25519.PublicKeySize {
				key = k
			}
		}
		if key == nil || !ed25519.Verify(key, payload, sig) {
			bad(KindBadSignature, "digest %d (sealing seq %d) does not verify", d.N, d.Seq)
		} else {
			rep.Signed++
			cur.signed = true
		}
	} else if pub != nil && cur.signed {
		bad(KindBadSignature, "digest %d is unsigned, after signed ones", d.N)
	}
	if d.Chain != chain {
		bad(KindEdited, "digest %d names chain %q", d.N, d.Chain)
	}
	switch p := cur.prev; {
	case p == nil && (d.N != 1 || d.PrevDigest != ""):
		bad(KindMissing, "the chain's digests start at %d: the ones before were deleted", d.N)
	case p != nil && d.N != p.N+1:
		bad(KindMissing, "digest %d follows digest %d", d.N, p.N)
	case p != nil && (d.PrevDigest != hexHash(sha256.Sum256(cur.prevLine)) || d.PrevSig != p.Sig):
		bad(KindEdited, "digest %d does not match what digest %d holds of it", p.N, d.N)
	case p != nil && d.Seq < p.Seq:
		bad(KindReordered, "digest %d seals seq %d, before digest %d's %d", d.N, d.Seq, p.N, p.Seq)
	}
	return &d
}

func mustHashOr(s string) [32]byte {
	h, _ := parseHash(s)
	return h
}

// verifyEntries places every record in its chain and reports what does
// not fit.
func verifyEntries(entries []*entry, views map[string]*chainView, rep *Report) {
	byHash := make(map[[32]byte]*entry, len(entries))
	var first time.Time
	for _, e := range entries {
		if e.damage == "" {
			byHash[e.hash] = e
		}
		if e.seq > 0 && e.damage == "" && (first.IsZero() || e.when.Before(first)) {
			first = e.when
		}
	}
	byChain := map[string][]*entry{}
	var orphans []*entry
	for _, e := range entries {
		switch {
		case e.seq == 0 && e.damage != "":
			orphans = append(orphans, e)
			continue
		case e.seq == 0:
			// Older than the chain: from before it existed.
			if first.IsZero() && len(views) == 0 || e.when.Before(first) {
				rep.Unchained++
			} else {
				rep.Problems = append(rep.Problems, Problem{Kind: KindInserted, Chain: e.chain, File: e.file, Detail: "a record without a place in any chain, newer than the chain's start"})
			}
			continue
		}
		place(e, byHash, rep)
		if _, known := views[e.chain]; !known && (e.damage != "" || e.pos == 1) {
			// No head file nor digest names its chain: a damaged record
			// whose place is unknown, or one whose replica was changed.
			if e.damage == "" {
				e.damage = KindEdited
			}
			orphans = append(orphans, e)
			continue
		}
		byChain[e.chain] = append(byChain[e.chain], e)
	}
	names := make([]string, 0, len(byChain)+len(views))
	for name := range byChain {
		names = append(names, name)
	}
	for name := range views {
		if _, ok := byChain[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	rep.Chains = len(names)
	for _, name := range names {
		v := views[name]
		if v == nil {
			v = &chainView{name: name, claims: map[uint64]claim{}}
		}
		cv := &chainCheck{v: v, rep: rep, orphans: &orphans}
		cv.check(byChain[name])
	}
	for _, e := range orphans {
		rep.Problems = append(rep.Problems, Problem{Kind: e.damage, Chain: e.chain, File: e.file, Detail: damageDetail(e.damage)})
	}
	sortProblems(rep.Problems)
}

// place finds a record's place from its link to the record before it
// (its seq may have been edited), and its chain from that record's.
func place(e *entry, byHash map[[32]byte]*entry, rep *Report) {
	e.pos = e.seq
	if !e.hasPrev {
		return
	}
	if e.prev == mustHash(genesisHash) {
		e.pos = 1
		return
	}
	p := byHash[e.prev]
	if p == nil || p == e || p.seq == 0 {
		return
	}
	e.pos = p.seq + 1
	if e.damage != "" {
		e.chain = p.chain // what is left of it may not name its chain
		return
	}
	if p.chain != e.chain {
		rep.Problems = append(rep.Problems, Problem{Kind: KindEdited, Chain: p.chain, Seq: e.pos, File: e.file,
			Detail: fmt.Sprintf("its replica says %q, but it follows seq %d of chain %q", e.chain, p.seq, p.chain)})
		e.reported = true
		e.chain = p.chain
	}
}

func damageDetail(kind string) string {
	if kind == KindTruncated {
		return "the file is cut short"
	}
	return "the file is no JSON record"
}

// hexOf is a hash in hex, as digests and cuts hold it.
func hexOf(h [32]byte) string { return hex.EncodeToString(h[:]) }
