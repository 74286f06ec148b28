package auditcli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
)

// days lists the day folders of the audit folder, oldest first.
func days(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if _, err := time.Parse("2006-01-02", e.Name()); err == nil && e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// recordsOf lists a day folder's record files, by start time.
func recordsOf(dir, day string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, day))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(day, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// printer writes records as a table or as JSON lines (each record file's
// bytes as they are).
type printer struct {
	w      io.Writer
	json   bool
	header bool
}

const rowFormat = "%-24s %6s %-16s %-20s %6s %-10s %s\n"

func (p *printer) print(data []byte) error {
	if p.json {
		_, err := p.w.Write(append(bytes.TrimRight(data, "\n"), '\n'))
		return err
	}
	var rec audit.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return err
	}
	if !p.header {
		p.header = true
		fmt.Fprintf(p.w, rowFormat, "STARTED (UTC)", "SEQ", "TOOL", "STATUS", "MS", "KEY", "CALL_ID")
	}
	status := rec.Status
	if rec.ErrorCode != "" && rec.ErrorCode != rec.Status {
		status += ":" + rec.ErrorCode
	}
	_, err := fmt.Fprintf(p.w, rowFormat, rec.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"), strconv.FormatUint(rec.Seq, 10),
		rec.ToolName, status, strconv.FormatInt(rec.DurationMS, 10), rec.Key, rec.CallID)
	return err
}

// show is "toolsvc audit show CALL_ID".
func show(e env, args []string) int {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the record's file as it is (one line) instead of indented")
	if done, code := e.parse(fs, args, "show [-json] CALL_ID [DATA_DIR]"); done {
		return code
	}
	if fs.NArg() < 1 {
		fmt.Fprintln(e.stderr, "usage: toolsvc audit show [-json] CALL_ID [DATA_DIR]")
		return ExitUsage
	}
	id := fs.Arg(0)
	dir, ok := e.auditDir(fs.Args()[1:])
	if !ok {
		return ExitUsage
	}
	// Names end in _<call id>.json; the newest days are likeliest.
	ds, err := days(dir)
	if err != nil {
		return e.fail(err)
	}
	for i := len(ds) - 1; i >= 0; i-- {
		matches, _ := filepath.Glob(filepath.Join(dir, ds[i], "*_"+escapeGlob(id)+".json"))
		if len(matches) == 0 {
			continue
		}
		data, err := os.ReadFile(matches[0])
		if err != nil {
			return e.fail(err)
		}
		if !*asJSON {
			var buf bytes.Buffer
			if json.Indent(&buf, data, "", "  ") == nil {
				data = buf.Bytes()
			}
		}
		fmt.Fprintf(e.stdout, "%s\n", bytes.TrimRight(data, "\n"))
		return ExitOK
	}
	fmt.Fprintf(e.stderr, "toolsvc audit: no record of call %q in %s\n", id, dir)
	return ExitFound
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// tail is "toolsvc audit tail [-f]".
func tail(e env, args []string) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	follow := fs.Bool("f", false, "go on printing records as they appear, until interrupted")
	n := fs.Int("n", 10, "records printed first")
	asJSON := fs.Bool("json", false, "JSON lines (each record as written) instead of a table")
	every := fs.Duration("interval", time.Second, "with -f: how often the folder is looked at")
	if done, code := e.parse(fs, args, "tail [-f] [-n 10] [-json] [DATA_DIR]"); done {
		return code
	}
	dir, ok := e.auditDir(fs.Args())
	if !ok {
		return ExitUsage
	}
	ds, err := days(dir)
	if err != nil {
		return e.fail(err)
	}
	p := &printer{w: e.stdout, json: *asJSON}
	var last []string
	for i := len(ds) - 1; i >= 0 && len(last) < *n; i-- {
		files, err := recordsOf(dir, ds[i])
		if err != nil {
			return e.fail(err)
		}
		last = append(files, last...)
	}
	seen := map[string]bool{}
	for _, f := range last {
		seen[f] = true
	}
	if err := printFiles(p, dir, last[max(0, len(last)-*n):]); err != nil {
		return e.fail(err)
	}
	if !*follow {
		return ExitOK
	}
	return e.follow(p, dir, seen, *every)
}

// follow prints the records that appear in the newest two day folders (a
// call that started yesterday may finish today) until ctx is done.
func (e env) follow(p *printer, dir string, seen map[string]bool, every time.Duration) int {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return ExitOK
		case <-t.C:
		}
		ds, err := days(dir)
		if err != nil {
			return e.fail(err)
		}
		var fresh []string
		for _, d := range ds[max(0, len(ds)-2):] {
			files, err := recordsOf(dir, d)
			if err != nil {
				continue // deleted by retention meanwhile
			}
			for _, f := range files {
				if !seen[f] {
					seen[f] = true
					fresh = append(fresh, f)
				}
			}
		}
		if err := printFiles(p, dir, fresh); err != nil {
			return e.fail(err)
		}
	}
}

func printFiles(p *printer, dir string, files []string) error {
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := p.print(data); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}
