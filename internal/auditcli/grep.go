package auditcli

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
)

// filter is what grep keeps: every field given must match.
type filter struct {
	tool, key, status string
	since, until      time.Time
}

func (f filter) match(rec *audit.Record) bool {
	switch {
	case f.tool != "" && rec.ToolName != f.tool,
		f.key != "" && rec.Key != f.key,
		f.status != "" && rec.Status != f.status && rec.ErrorCode != f.status,
		!f.since.IsZero() && rec.Timestamp.Before(f.since),
		!f.until.IsZero() && !rec.Timestamp.Before(f.until):
		return false
	}
	return true
}

// grep is "toolsvc audit grep".
func grep(e env, args []string) int {
	fs := flag.NewFlagSet("grep", flag.ContinueOnError)
	var f filter
	fs.StringVar(&f.tool, "tool", "", "the tool's name")
	fs.StringVar(&f.key, "key", "", "the API key's name")
	fs.StringVar(&f.status, "status", "", "success, error, interrupted, or an error code (timeout, denied, ...)")
	since := fs.String("since", "", "calls started at or after: RFC 3339, a date, or a duration back from now (24h)")
	until := fs.String("until", "", "calls started before: as -since")
	asJSON := fs.Bool("json", false, "JSON lines (each record as written) instead of a table")
	progress := fs.Bool("progress", false, "report progress on standard error even when it is no terminal")
	if done, code := e.parse(fs, args, "grep [-tool T] [-key K] [-status S] [-since T] [-until T] [-json] [-progress] [DATA_DIR]"); done {
		return code
	}
	var err error
	now := time.Now()
	if f.since, err = parseTime(*since, now); err != nil {
		fmt.Fprintf(e.stderr, "toolsvc audit: -since: %v\n", err)
		return ExitUsage
	}
	if f.until, err = parseTime(*until, now); err != nil {
		fmt.Fprintf(e.stderr, "toolsvc audit: -until: %v\n", err)
		return ExitUsage
	}
	dir, ok := e.auditDir(fs.Args())
	if !ok {
		return ExitUsage
	}
	found, err := e.scan(dir, f, &printer{w: e.stdout, json: *asJSON}, e.showProgress(*progress))
	if err != nil {
		return e.fail(err)
	}
	if found == 0 {
		return ExitFound
	}
	return ExitOK
}

// scan prints the records of dir that f keeps, day by day, skipping the
// days outside its time range (a call is in the folder of the day it
// started).
func (e env) scan(dir string, f filter, p *printer, progress bool) (int, error) {
	ds, err := days(dir)
	if err != nil {
		return 0, err
	}
	found, read := 0, 0
	for i, d := range ds {
		day, _ := time.Parse("2006-01-02", d)
		if (!f.since.IsZero() && day.Add(24*time.Hour).Before(f.since)) || (!f.until.IsZero() && !day.Before(f.until)) {
			continue
		}
		files, err := recordsOf(dir, d)
		if err != nil {
			return found, err
		}
		for _, name := range files {
			if e.ctx.Err() != nil {
				return found, e.ctx.Err()
			}
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return found, err
			}
			read++
			var rec audit.Record
			if json.Unmarshal(data, &rec) != nil || !f.match(&rec) {
				continue
			}
			found++
			if err := p.print(data); err != nil {
				return found, err
			}
		}
		if progress {
			fmt.Fprintf(e.stderr, "\rgrep: %d of %d days, %d records read, %d found", i+1, len(ds), read, found)
		}
	}
	if progress {
		fmt.Fprintln(e.stderr)
	}
	return found, nil
}

// parseTime reads an RFC 3339 time, a date (UTC), a date and time to the
// minute (UTC), or a duration back from now. Empty is the zero time.
func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is no time: give RFC 3339 (2026-12-02T10:00:00Z), a date (2026-12-02) or a duration back from now (24h)", s)
}
