package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// openOwnChain loads the signing key and takes this replica's chain.
func (l *Log) openOwnChain() error {
	if l.opts.SigningKeyFile != "" {
		key, err := SigningKey(l.opts.SigningKeyFile)
		if err != nil {
			return err
		}
		l.key = key
	}
	c, err := l.openChain(l.opts.Replica)
	if err != nil {
		return fmt.Errorf("audit: chain of replica %q: %w", l.opts.Replica, err)
	}
	l.chain = c
	return nil
}

// startDigests writes a digest every Options.DigestInterval, when records
// were added, until Close.
func (l *Log) startDigests() {
	every := l.opts.DigestInterval
	if every == 0 {
		every = time.Minute
	}
	if every < 0 {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	l.stopDigests = stop
	l.digests.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := l.chain.writeDigest(l.opts.Now(), l.key); err != nil {
					l.opts.Log.Error().Err(err).Msg("audit: cannot write the chain's digest; the next one covers its records")
				}
			}
		}
	})
}

// seal writes a record encoded in buf[sealRoom:] in the chain, under
// day/name. Without a chain (benchmarks that measure what it costs) the
// record is written as it was before there was one.
func (l *Log) seal(buf []byte, day, name string) ([]byte, error) {
	if l.chain != nil {
		return l.chain.seal(buf, day, name, false)
	}
	data := buf[sealRoom:]
	fd := l.files.reserve(day)
	err := l.fault("record")
	if err == nil {
		err = l.files.placeIn(day, name, data, false, fd)
	} else {
		l.files.unreserve(fd)
	}
	if err != nil {
		return nil, err
	}
	l.toStdout(data)
	return data, nil
}

// finalDigest seals the chain at Close and lets it go.
func (l *Log) finalDigest() {
	if l.chain == nil {
		return
	}
	if err := l.chain.writeDigest(l.opts.Now(), l.key); err != nil {
		l.opts.Log.Error().Err(err).Msg("audit: cannot write the chain's last digest")
	}
	l.chain.close()
}

// Digest writes a digest of the chain now, if records were added since
// the last one.
func (l *Log) Digest() error { return l.chain.writeDigest(l.opts.Now(), l.key) }

// recordCut notes in a digest, written now, the records of the day
// folders retention is about to delete.
func (l *Log) recordCut(days []string) error {
	cut, err := cutOf(l.opts.Dir, days)
	if err != nil {
		return err
	}
	l.chain.addCut(cut)
	return l.chain.writeDigest(l.opts.Now(), l.key)
}

// cutOf reads the records of the day folders and makes them into runs.
func cutOf(dir string, days []string) (Cut, error) {
	cut := Cut{Days: days}
	type link struct {
		seq  uint64
		hash [32]byte
	}
	chains := map[string][]link{}
	for _, day := range days {
		entries, err := os.ReadDir(filepath.Join(dir, day))
		if err != nil {
			return cut, err
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, day, e.Name()))
			if err != nil {
				return cut, err
			}
			f, ok := parseChained(data)
			if !ok || f.Seq == 0 {
				cut.Unchained++
				continue
			}
			chains[f.Replica] = append(chains[f.Replica], link{f.Seq, sha256.Sum256(data)})
		}
	}
	names := make([]string, 0, len(chains))
	for name := range chains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		links := chains[name]
		sort.Slice(links, func(i, j int) bool { return links[i].seq < links[j].seq })
		for i := 0; i < len(links); {
			j := i
			for j+1 < len(links) && links[j+1].seq == links[j].seq+1 {
				j++
			}
			cut.Runs = append(cut.Runs, CutRun{Chain: name, First: links[i].seq, Last: links[j].seq, LastHash: hex.EncodeToString(links[j].hash[:])})
			i = j + 1
		}
	}
	return cut, nil
}

// chained is what the chain needs of a record.
type chained struct {
	Seq       uint64    `json:"seq"`
	Prev      string    `json:"prev"`
	CallID    string    `json:"call_id"`
	Replica   string    `json:"replica"`
	Timestamp time.Time `json:"timestamp"`
}

func parseChained(data []byte) (chained, bool) {
	var f chained
	if json.Unmarshal(data, &f) != nil || f.CallID == "" {
		return f, false
	}
	return f, true
}

// chainFor returns the chain records of replica go to while reconciling:
// this process's own, or a dead replica's, taken for the while (close
// says whether to let it go). busy: a live process writes it, and
// reconciles the journal itself.
func (l *Log) chainFor(replica string) (c *chain, close bool, err error) {
	if replica == l.opts.Replica {
		return l.chain, false, nil
	}
	c, err = l.openChain(replica)
	return c, err == nil, err
}

// sealReconciled writes a record the reconciliation makes, in its chain.
func (l *Log) sealReconciled(c *chain, rec Record) error {
	rec = l.prepare(rec, nil)
	buf, err := appendRecord(make([]byte, sealRoom, sealRoom+1024), &rec)
	if err != nil {
		return err
	}
	rel := FileName(rec)
	_, err = c.seal(buf, filepath.Dir(rel), filepath.Base(rel), false)
	return err
}

// finishDeadChain seals a dead replica's chain, whose end no digest may
// cover yet, and lets it go.
func (l *Log) finishDeadChain(c *chain) {
	if err := c.writeDigest(l.opts.Now(), l.key); err != nil {
		l.opts.Log.Error().Err(err).Str("chain", c.name).Msg("audit: cannot write the digest of a dead replica's chain")
	}
	c.close()
}
