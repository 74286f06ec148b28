package audit

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// The layouts of a record's day folder and of the start of its file name.
const (
	dayLayout   = "2006-01-02"
	stampLayout = "20060102T150405.000000000Z"
)

// FileName returns the path of a record's file relative to the audit folder:
// names sort by start time and carry the call ID.
func FileName(rec Record) string {
	t := rec.Timestamp.UTC()
	return filepath.Join(t.Format(dayLayout), t.Format(stampLayout)+"_"+rec.CallID+".json")
}

func dayOf(t time.Time) string { return t.UTC().Format(dayLayout) }

// recordName is FileName split into the day folder and the file's name, as
// files.placeIn takes them. ok is false for a call ID FileName would clean
// or split (one holding a path separator); the caller then takes
// FileName's path as it is. days caches the day folder's name.
func recordName(rec *Record, days *dayNames) (day, name string, ok bool) {
	if strings.ContainsRune(rec.CallID, '/') || strings.ContainsRune(rec.CallID, filepath.Separator) {
		return "", "", false
	}
	t := rec.Timestamp.UTC()
	if t.Year() < 0 || t.Year() > 9999 {
		return "", "", false
	}
	var buf [64]byte
	b := appendStamp(buf[:0], t)
	return days.of(t), string(b) + "_" + rec.CallID + ".json", true
}

// appendStamp appends t (UTC, a year of four digits) as stampLayout
// formats it, without parsing the layout each time.
func appendStamp(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = appendDigits(b, int(month), 2)
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = appendDigits(b, min, 2)
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond(), 9)
	return append(b, 'Z')
}

// appendDigits appends n >= 0 in exactly width (at most 10) digits.
func appendDigits(b []byte, n, width int) []byte {
	b = append(b, "0000000000"[:width]...)
	for i := len(b) - 1; n > 0 && i >= len(b)-width; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return b
}

// dayNames hands out the name of a day folder, formatted once per day
// rather than once per call.
type dayNames struct {
	last atomic.Pointer[dayName]
}

type dayName struct {
	start, end int64 // the day's first and last second, Unix time
	name       string
}

// of returns dayOf(t).
func (d *dayNames) of(t time.Time) string {
	s := t.Unix()
	if n := d.last.Load(); n != nil && s >= n.start && s <= n.end {
		return n.name
	}
	u := t.UTC()
	start := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC).Unix()
	n := &dayName{start: start, end: start + 86399, name: u.Format(dayLayout)}
	d.last.Store(n)
	return n.name
}
