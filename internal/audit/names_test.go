package audit

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// TestRecordNameMatchesFileName: the day folder and file name Finish uses
// are FileName's, split, for times across days, years and zones, and a
// call ID with a separator falls back to FileName.
func TestRecordNameMatchesFileName(t *testing.T) {
	east := time.FixedZone("east", 14*3600)
	times := []time.Time{
		time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 1, 9, 8, 7, 6, east),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 5, time.UTC),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		times = append(times, time.Unix(r.Int64N(1<<34)-1<<33, r.Int64N(1e9)).In(east))
	}
	var days dayNames
	for _, ts := range times {
		rec := Record{CallID: "3f2a", Timestamp: ts}
		day, name, ok := recordName(&rec, &days)
		if !ok {
			if y := ts.UTC().Year(); y >= 0 && y <= 9999 {
				t.Errorf("%v: no name", ts)
			}
			continue
		}
		if got, want := filepath.Join(day, name), FileName(rec); got != want {
			t.Errorf("%v: %s, want %s", ts, got, want)
		}
		if day != dayOf(ts) {
			t.Errorf("%v: day %s, want %s", ts, day, dayOf(ts))
		}
	}
	for _, id := range []string{"a/b", "../x", "a" + string(filepath.Separator) + "b"} {
		rec := Record{CallID: id, Timestamp: times[0]}
		if _, _, ok := recordName(&rec, &days); ok {
			t.Errorf("call ID %q: a name of its own, want FileName's", id)
		}
	}
}
