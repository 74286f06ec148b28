package audit

import (
	"fmt"
	"sort"
)

// chainCheck walks one chain's places, 1 to its end.
type chainCheck struct {
	v       *chainView
	rep     *Report
	orphans *[]*entry // damaged files whose place is unknown
	at      map[uint64]*entry
	prevs   map[[32]byte]bool // the prevs records hold
	end     uint64
}

func (c *chainCheck) problem(e *entry, pos uint64, kind, format string, args ...any) {
	p := Problem{Kind: kind, Chain: c.v.name, Seq: pos, Detail: fmt.Sprintf(format, args...)}
	if e != nil {
		if e.reported {
			return
		}
		e.reported = true
		p.File = e.file
	}
	c.rep.Problems = append(c.rep.Problems, p)
}

func (c *chainCheck) check(entries []*entry) {
	c.at = make(map[uint64]*entry, len(entries))
	dups := map[uint64][]*entry{} // places more than one record claims
	c.prevs = make(map[[32]byte]bool, len(entries))
	for _, e := range entries {
		if e.hasPrev {
			c.prevs[e.prev] = true
		}
		if o := c.at[e.pos]; o != nil {
			if len(dups[e.pos]) == 0 {
				dups[e.pos] = []*entry{o}
			}
			dups[e.pos] = append(dups[e.pos], e)
		}
		c.at[e.pos] = e
		c.end = max(c.end, e.pos)
	}
	for pos, g := range dups {
		c.at[pos] = c.genuine(pos, g)
	}
	last := c.end
	c.end = max(c.end, c.v.last)
	for pos := uint64(1); pos <= c.end; pos++ {
		e := c.at[pos]
		if e == nil {
			pos = c.gap(pos, last)
			continue
		}
		c.entry(pos, e)
		if pos > c.v.last {
			c.rep.Unsealed++
		}
	}
	// Records whose bytes are intact but that sit in another record's
	// file: moved, or swapped with it.
	for pos, e := range c.at {
		if !e.nameOK && e.damage == "" {
			c.problem(e, pos, KindReordered, "the file's name is not its record's (call %s of %s): moved or swapped with another record", e.callID, e.when.Format(stampLayout))
		}
	}
	c.tail()
}

// genuine picks, of the records that claim one place, the one the chain
// holds: the one the next record or a digest names; the others are
// inserted.
func (c *chainCheck) genuine(pos uint64, g []*entry) *entry {
	if len(g) == 1 {
		return g[0]
	}
	score := func(e *entry) int {
		s := 0
		if cl, ok := c.v.claims[pos]; ok && cl.hash == e.hash {
			s += 4
		}
		if c.prevs[e.hash] {
			s += 2
		}
		if e.damage == "" && e.seq == pos {
			s++
		}
		return s
	}
	sort.SliceStable(g, func(i, j int) bool {
		si, sj := score(g[i]), score(g[j])
		if si != sj {
			return si > sj
		}
		return g[i].file < g[j].file
	})
	for _, e := range g[1:] {
		c.problem(e, pos, KindInserted, "a second record at seq %d: the chain holds %s", pos, g[0].file)
	}
	return g[0]
}

// gap reports the places from pos on that have no record and returns the
// last of them. Places retention cut are no gap.
func (c *chainCheck) gap(pos, last uint64) uint64 {
	q := pos
	for q+1 <= c.end && c.at[q+1] == nil {
		q++
	}
	for s := pos; s <= q; s++ {
		if c.cutAt(s) != nil {
			continue
		}
		t := s
		for t+1 <= q && c.cutAt(t+1) == nil {
			t++
		}
		c.missing(s, t, last)
		s = t
	}
	return q
}

// missing reports the places s..t, which no record holds nor retention
// cut.
func (c *chainCheck) missing(s, t, last uint64) {
	if s == t && len(*c.orphans) > 0 {
		// A file too damaged to say its place stands in for the one
		// record missing: the one whose seq is still readable first.
		i := 0
		for j, o := range *c.orphans {
			if o.seq == s {
				i = j
			}
		}
		e := (*c.orphans)[i]
		*c.orphans = append((*c.orphans)[:i], (*c.orphans)[i+1:]...)
		e.chain = c.v.name
		c.problem(e, s, e.damage, "%s (it held seq %d)", orphanDetail(e), s)
		return
	}
	what := fmt.Sprintf("seq %d", s)
	if t > s {
		what = fmt.Sprintf("seqs %d-%d (%d records)", s, t, t-s+1)
	}
	if s > last {
		cl := c.v.claims[c.v.last]
		c.problem(nil, s, KindTruncated, "the chain ends at seq %d, but the digest of %s seals seq %d: %s deleted from its end", last, cl.when.Format("2006-01-02 15:04:05Z"), c.v.last, what)
		return
	}
	c.problem(nil, s, KindMissing, "%s deleted (no retention cut names them)", what)
}

// entry checks the record at pos: whole, tied to the record before it,
// at the place its seq says, and as the digests sealed it.
func (c *chainCheck) entry(pos uint64, e *entry) {
	if e.damage != "" {
		c.problem(e, pos, e.damage, "%s", damageDetail(e.damage))
	}
	if !c.linked(pos, e) {
		c.blame(pos, e)
	}
	if e.seq != pos {
		c.problem(e, pos, KindEdited, "its seq says %d, but it follows seq %d", e.seq, pos-1)
	}
	if cl, ok := c.v.claims[pos]; ok && cl.hash != e.hash {
		c.problem(e, pos, KindEdited, "its bytes differ from what the digest of %s sealed", cl.when.Format("2006-01-02 15:04:05Z"))
	}
}

// linked reports whether e's prev is the record before it: the record
// at pos-1, or the last hash of the run retention cut before it.
func (c *chainCheck) linked(pos uint64, e *entry) bool {
	if pos == 1 {
		return e.hasPrev && e.prev == mustHash(genesisHash)
	}
	if p := c.at[pos-1]; p != nil {
		return e.hasPrev && e.prev == p.hash
	}
	if r := c.cutAt(pos - 1); r != nil && r.Last == pos-1 {
		return e.hasPrev && hexOf(e.prev) == r.LastHash
	}
	return true // a gap, reported as one
}

// blame names the record a broken link shows edited: the record before,
// whose bytes no longer hash to the prev e holds, unless that one is
// sealed by a digest as it is, or e's own link to the next is broken too
// (then e's prev was changed).
func (c *chainCheck) blame(pos uint64, e *entry) {
	p := c.at[pos-1]
	if p == nil || pos == 1 {
		c.problem(e, pos, KindEdited, "its prev is not the hash of the record before it")
		return
	}
	if cl, ok := c.v.claims[pos]; ok && cl.hash != e.hash {
		c.problem(e, pos, KindEdited, "its prev is not the hash of seq %d, and its bytes differ from what the digest of %s sealed", pos-1, cl.when.Format("2006-01-02 15:04:05Z"))
		return
	}
	if cl, ok := c.v.claims[pos-1]; ok && cl.hash == p.hash {
		c.problem(e, pos, KindEdited, "its prev is not the hash of seq %d, which a digest sealed as it is", pos-1)
		return
	}
	if n := c.at[pos+1]; n != nil && !(n.hasPrev && n.prev == e.hash) {
		c.problem(e, pos, KindEdited, "neither its prev nor its own hash match its neighbours")
		return
	}
	if p.damage == "" {
		c.problem(p, pos-1, KindEdited, "its bytes no longer hash to the prev of seq %d", pos)
	}
}

// cutAt returns the run retention cut that holds seq s, or nil.
func (c *chainCheck) cutAt(s uint64) *CutRun {
	runs := c.v.runs
	i := sort.Search(len(runs), func(i int) bool { return runs[i].Last >= s })
	for ; i < len(runs) && runs[i].First <= s; i++ {
		if runs[i].Last >= s {
			return &runs[i]
		}
	}
	return nil
}

// tail compares the chain's end with its head file: records past the
// head were not written by the service; a head past the records shows
// records deleted from the end, since the last digest.
func (c *chainCheck) tail() {
	if !c.v.hasHead {
		return
	}
	for pos := c.v.head + 1; pos <= c.end; pos++ {
		if e := c.at[pos]; e != nil {
			c.problem(e, pos, KindInserted, "past the chain's head (seq %d), which the service moves with every record", c.v.head)
		}
	}
	if c.v.head > c.end && c.cutAt(c.v.head) == nil {
		c.problem(nil, c.end+1, KindTruncated, "the chain ends at seq %d, but its head file names seq %d: records deleted from its end (after the last digest)", c.end, c.v.head)
	}
}

func orphanDetail(e *entry) string {
	if e.damage == KindEdited && e.callID != "" {
		return "its replica names no chain of this log"
	}
	return damageDetail(e.damage)
}
