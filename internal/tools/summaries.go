package tools

import (
	"fmt"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/runes"
)

// The summaries below are what a person reads when a call waits for
// their approval (approval.Summarizer): what the call will do, in words,
// with the values that decide it. They are computed from the checked
// arguments alone, before the call runs, and never touch the workspace:
// Summarize is not given the call's facts, so it cannot know which folder
// (the key's own, under a policy) a path would land in. A summary that
// cannot be made is "", and the hold point then names the tool and each
// argument instead.

// Bounds of what a summary quotes. The hold point cuts a whole summary
// at 600 characters; these keep the parts after a long value (exec's
// folder and timeout) inside that, and a cut value is said to be cut.
const (
	summaryCommand = 400
	summaryPath    = 200
	summaryEdit    = 120
)

// Summarize says what a call of exec will run, where and for how long
// at most: "run the command: git push origin main (in the folder
// services/api, timeout 30 s)".
func (e *Exec) Summarize(args []byte) string {
	a, err := e.Decode(args)
	if err != nil || a.Command == "" {
		return ""
	}
	timeout := e.opts.DefaultTimeout
	if a.Timeout > 0 {
		timeout = min(time.Duration(a.Timeout)*time.Second, e.opts.MaxTimeout)
	}
	where := "the workspace's top folder"
	if d := summaryPathOf(a.WorkingDir); d != "" && d != "." {
		where = "the folder " + d
	}
	return fmt.Sprintf("run the command: %s (in %s, timeout %d s)", quoteCut(a.Command, summaryCommand), where, int(timeout/time.Second))
}

// Summarize says what a call of write_file will write, how much, and
// where: "write 1204 bytes to deploy/prod.yaml, replacing the file if it
// exists". Whether the file exists is not looked up (see above).
func (t *WriteFile) Summarize(args []byte) string {
	a, err := t.Decode(args)
	if err != nil || a.Path == "" {
		return ""
	}
	n := len(a.Content)
	size := fmt.Sprintf("%d %s", n, runes.Plural(n, "byte", "bytes"))
	if a.Mode == "append" {
		return fmt.Sprintf("append %s to the end of %s, creating the file if it does not exist", size, summaryPathOf(a.Path))
	}
	return fmt.Sprintf("write %s to %s, replacing the file if it exists", size, summaryPathOf(a.Path))
}

// Summarize says which file a call of edit_file changes and how, both
// texts shortened: `edit config/app.yaml: replace "replicas: 1" with
// "replicas: 3"`.
func (t *EditFile) Summarize(args []byte) string {
	a, err := t.Decode(args)
	if err != nil || a.Path == "" {
		return ""
	}
	which := "replace"
	if a.ReplaceAll {
		which = "replace every occurrence of"
	}
	return fmt.Sprintf("edit %s: %s %s with %s", summaryPathOf(a.Path), which, quoteCut(a.OldStr, summaryEdit), quoteCut(a.NewStr, summaryEdit))
}

// summaryPathOf is p as the tools resolve it, cleaned, so that
// "./notes/../deploy/x" reads as what it is, deploy/x; the path as given
// follows when it differs by more than a leading "./" or a trailing "/",
// for the person comparing it with the arguments.
func summaryPathOf(p string) string {
	if p == "" {
		return ""
	}
	c := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	shown := visible(runes.Shorten(c, summaryPath))
	if strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/") != c {
		shown += " (given as " + visible(runes.Shorten(p, summaryPath)) + ")"
	}
	return shown
}

// quoteCut quotes s for a summary, at most n characters of it, and says
// how long it is when it was cut: the person deciding then knows to read
// the whole in the arguments.
func quoteCut(s string, n int) string {
	q := "\"" + visible(runes.Shorten(s, n)) + "\""
	if total := utf8.RuneCountInString(s); total > n {
		q += fmt.Sprintf(" (cut: %d characters in all; the arguments hold more)", total)
	}
	return q
}

// visible shows line breaks as ⏎ and other control and format characters
// as escapes, so that a value cannot hide part of itself from the person
// reading it (a carriage return that makes a terminal overwrite the line,
// a right-to-left mark that reverses what follows).
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(" ⏎ ")
		case r == '\t':
			b.WriteString("    ")
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	_ approval.Summarizer = (*Exec)(nil)
	_ approval.Summarizer = (*WriteFile)(nil)
	_ approval.Summarizer = (*EditFile)(nil)
)
