//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// This file reads a Markdown page into the script TestDocsRun runs, and
// compares what a command printed with what the page shows. The
// conventions are described at the top of docs_run_test.go.

// docBlock is one fenced shell block of a page, or a hidden set-up block.
type docBlock struct {
	line int    // of the opening fence (or of the set-up comment), from 1
	skip string // the reason of a <!-- not run: ... --> marker
	cmds []docCmd
}

// docCmd is one command of a block, as written, with what the page says it
// prints.
type docCmd struct {
	line     int
	text     string
	wantJSON string   // a JSON pattern: "..." and bare ... are wildcards
	wantText []string // lines; "..." in a line matches anything, a line "..." any lines
	wantExit int
	hasWant  bool
}

var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

var (
	notRunMarker = regexp.MustCompile(`^<!--\s*not run:\s*(.*?)\s*-->$`)
	outputMarker = regexp.MustCompile(`^<!--\s*output\s*-->$`)
	setupMarker  = regexp.MustCompile(`^<!--\s*run:\s*setup\s*$`)
	exitComment  = regexp.MustCompile(`^#\s*exit status (\d+)\s*$`)
	arrowComment = regexp.MustCompile(`(?:^|\s)#\s*=>\s?(.*)$`)
)

// parsePage returns the shell blocks of a Markdown page in order, with the
// outputs the page shows attached to their commands. complete reports
// whether bash reads a text as whole commands (see bashComplete).
func parsePage(page string, complete func(string) bool) ([]docBlock, error) {
	lines := strings.Split(page, "\n")
	var blocks []docBlock
	marker := "" // the last non-blank line before a fence
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if setupMarker.MatchString(line) {
			end := indexFrom(lines, i+1, "-->")
			if end < 0 {
				return nil, fmt.Errorf("line %d: <!-- run: setup has no closing -->", i+1)
			}
			b, err := shellBlock(lines[i+1:end], i+2, false, complete)
			if err != nil {
				return nil, err
			}
			b.line = i + 1
			blocks = append(blocks, b)
			i, marker = end, ""
			continue
		}
		if !strings.HasPrefix(line, "```") {
			if line != "" {
				marker = line
			}
			continue
		}
		lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "```")), " ")
		end := indexFrom(lines, i+1, "```")
		if end < 0 {
			return nil, fmt.Errorf("line %d: unclosed fence", i+1)
		}
		body := lines[i+1 : end]
		if err := addBlock(&blocks, marker, lang, body, i+1, complete); err != nil {
			return nil, err
		}
		i, marker = end, ""
	}
	return blocks, nil
}

// addBlock adds a fenced block that opens on line to blocks: a shell block
// to run or skip, or an output block for the last command before it.
func addBlock(blocks *[]docBlock, marker, lang string, body []string, line int, complete func(string) bool) error {
	if outputMarker.MatchString(marker) {
		if len(*blocks) == 0 || len((*blocks)[len(*blocks)-1].cmds) == 0 {
			return fmt.Errorf("line %d: an output block with no command before it", line)
		}
		last := &(*blocks)[len(*blocks)-1]
		c := &last.cmds[len(last.cmds)-1]
		if c.hasWant {
			return fmt.Errorf("line %d: the command on line %d already shows its output", line, c.line)
		}
		c.hasWant = true
		if lang == "json" {
			c.wantJSON = strings.Join(body, "\n")
		} else {
			c.wantText = body
		}
		return nil
	}
	if !shellLangs[lang] {
		return nil
	}
	b, err := shellBlock(body, line+1, lang == "console", complete)
	if err != nil {
		return err
	}
	b.line = line
	if m := notRunMarker.FindStringSubmatch(marker); m != nil {
		b.skip = m[1]
		if !strings.HasPrefix(b.skip, "needs ") && !strings.HasPrefix(b.skip, "is the suite") {
			return fmt.Errorf("line %d: a block not run says why with \"needs\" and what this machine lacks: %q", line, marker)
		}
	}
	*blocks = append(*blocks, b)
	return nil
}

// shellBlock splits the lines of a block, the first of which is line, into
// commands: for console blocks the lines after "$ " (and "> " for their
// continuation), the others being the output; for the others each whole
// command and the comments after it that show its output.
func shellBlock(body []string, line int, console bool, complete func(string) bool) (docBlock, error) {
	var b docBlock
	var cur []string
	for i := 0; i < len(body); i++ {
		text := body[i]
		trimmed := strings.TrimSpace(text)
		if console && len(cur) == 0 && !strings.HasPrefix(trimmed, "$ ") {
			if len(b.cmds) > 0 && trimmed != "" {
				c := &b.cmds[len(b.cmds)-1]
				c.hasWant, c.wantText = true, append(c.wantText, text)
			}
			continue
		}
		if len(cur) == 0 && strings.HasPrefix(trimmed, "#") {
			n, err := readComment(&b, body, i)
			if err != nil {
				return b, fmt.Errorf("line %d: %v", line+i, err)
			}
			i += n - 1
			continue
		}
		if len(cur) == 0 && trimmed == "" {
			continue
		}
		if console {
			text = strings.TrimPrefix(strings.TrimPrefix(text, "$ "), "> ")
		}
		cur = append(cur, text)
		if all := strings.Join(cur, "\n"); !strings.HasSuffix(text, "\\") && complete(all) {
			c := docCmd{line: line + i - len(cur) + 1, text: all}
			if m := arrowComment.FindStringSubmatch(cur[len(cur)-1]); m != nil {
				c.hasWant, c.wantText = true, []string{m[1]}
			}
			b.cmds = append(b.cmds, c)
			cur = nil
		}
	}
	if len(cur) > 0 {
		return b, fmt.Errorf("line %d: the command is not complete at the end of the block", line+len(body)-len(cur))
	}
	return b, nil
}

// readComment reads the comment lines from body[i] that tell what the
// command before prints: a JSON pattern ("# {" or "# [", continued on the
// next comment lines until its brackets close), a line of text ("# => "),
// or an exit status ("# exit status 2"). Any other comment is prose. It
// returns the number of lines read.
func readComment(b *docBlock, body []string, i int) (int, error) {
	text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(body[i]), "#"))
	var c *docCmd
	if len(b.cmds) > 0 {
		c = &b.cmds[len(b.cmds)-1]
	}
	if m := exitComment.FindStringSubmatch(strings.TrimSpace(body[i])); m != nil && c != nil {
		c.wantExit, _ = strconv.Atoi(m[1])
		return 1, nil
	}
	if m := arrowComment.FindStringSubmatch(strings.TrimSpace(body[i])); m != nil && c != nil {
		c.hasWant, c.wantText = true, append(c.wantText, m[1])
		return 1, nil
	}
	if c == nil || (!strings.HasPrefix(text, "{") && !strings.HasPrefix(text, "[")) {
		return 1, nil
	}
	n := 1
	for bracketDepth(text) > 0 && i+n < len(body) && strings.HasPrefix(strings.TrimSpace(body[i+n]), "#") {
		text += " " + strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(body[i+n]), "#"))
		n++
	}
	if c.hasWant {
		return n, fmt.Errorf("the command on line %d shows two outputs", c.line)
	}
	c.hasWant, c.wantJSON = true, text
	return n, nil
}

// bracketDepth returns how many brackets and braces of a JSON text are
// still open, outside its strings.
func bracketDepth(s string) int {
	depth, inString := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '['):
			depth++
		case !inString && (c == '}' || c == ']'):
			depth--
		}
	}
	return depth
}

func indexFrom(lines []string, from int, prefix string) int {
	for j := from; j < len(lines); j++ {
		if strings.HasPrefix(strings.TrimSpace(lines[j]), prefix) {
			return j
		}
	}
	return -1
}

// bashComplete reports whether bash reads text as complete commands: no
// open quote, continued line, here-document or compound command.
func bashComplete(text string) bool {
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = strings.NewReader(text + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return cmd.Run() == nil && stderr.Len() == 0
}

// killPattern is a terminal's kill of background jobs: kill %1, kill
// -INT %2, kill %1 %2.
var killPattern = regexp.MustCompile(`^kill(?:\s+-(INT|TERM))?((?:\s+%[0-9]+)+)\s*(?:#.*)?$`)

// killCommand tells whether a command is kill %N..., with which signal
// and which jobs.
func killCommand(text string) (sig syscall.Signal, jobs []int, ok bool) {
	m := killPattern.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return 0, nil, false
	}
	for _, f := range strings.Fields(m[2]) {
		n, _ := strconv.Atoi(strings.TrimPrefix(f, "%"))
		jobs = append(jobs, n)
	}
	if m[1] == "INT" {
		return syscall.SIGINT, jobs, true
	}
	return syscall.SIGTERM, jobs, true
}

// portPattern finds the documented port in commands and outputs.
var portPattern = regexp.MustCompile(`((?:localhost|127\.0\.0\.1|0\.0\.0\.0)?):8080\b`)

// withPort rewrites the documented address's port 8080 to port.
func withPort(s string, port int) string {
	return portPattern.ReplaceAllString(s, "${1}:"+strconv.Itoa(port))
}

// matchText compares output with the lines a page shows: trailing blanks
// are ignored, "..." within a line matches any text, and a line that is
// only "..." matches any number of lines.
func matchText(want []string, got string) bool {
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if strings.TrimRight(got, "\n") == "" {
		lines = nil
	}
	for len(want) > 0 && strings.TrimSpace(want[len(want)-1]) == "" {
		want = want[:len(want)-1]
	}
	return matchLines(want, lines)
}

func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for k := 0; k <= len(got); k++ {
			if matchLines(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && globMatch(strings.TrimRight(want[0], " \t"), strings.TrimRight(got[0], " \t\r")) && matchLines(want[1:], got[1:])
}

// globMatch reports whether s is pattern with each "..." standing for any
// text.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "...")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		j := strings.Index(s, p)
		if j < 0 {
			return false
		}
		s = s[j+len(p):]
	}
	last := parts[len(parts)-1]
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// parseJSONPattern reads a JSON text in which a bare ... stands for the
// members or elements not shown, into a value for matchJSON.
func parseJSONPattern(pattern string) (any, error) {
	var out strings.Builder
	var stack []byte
	inString := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case inString && c == '\\' && i+1 < len(pattern):
			out.WriteByte(c)
			i++
			c = pattern[i]
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '['):
			stack = append(stack, c)
		case !inString && (c == '}' || c == ']') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		case !inString && strings.HasPrefix(pattern[i:], "..."):
			i += 2
			if len(stack) > 0 && stack[len(stack)-1] == '{' {
				out.WriteString(`"...":"..."`)
			} else {
				out.WriteString(`"..."`)
			}
			continue
		}
		out.WriteByte(c)
	}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the output shown is not JSON with ... for what is left out: %v", err)
	}
	return v, nil
}

// volatileKey names the fields whose values differ from run to run (ids,
// times, durations): a pattern only asks that they be there.
func volatileKey(k string) bool {
	return k == "id" || strings.HasSuffix(k, "_id") || strings.HasSuffix(k, "_ms") || strings.HasSuffix(k, "_at") ||
		k == "time" || k == "timestamp" || k == "ts"
}

// matchJSON compares a value with a pattern from parseJSONPattern: an
// object's members shown must be there and match, others may be; the
// string "..." matches any value, and as the last element of an array any
// further elements; "..." within a string matches any text. It returns
// where they differ, or "".
func matchJSON(want, got any, path string) string {
	switch w := want.(type) {
	case string:
		if w == "..." {
			return ""
		}
		if g, ok := got.(string); ok && globMatch(w, g) {
			return ""
		}
	case json.Number:
		if g, ok := got.(json.Number); ok {
			wf, _ := w.Float64()
			gf, _ := g.Float64()
			if wf == gf {
				return ""
			}
		}
	case map[string]any:
		return matchObject(w, got, path)
	case []any:
		return matchArray(w, got, path)
	default:
		if fmt.Sprint(want) == fmt.Sprint(got) {
			return ""
		}
	}
	g, _ := json.Marshal(got)
	return fmt.Sprintf("%s is %s", pathOrTop(path), g)
}

func matchObject(want map[string]any, got any, path string) string {
	g, ok := got.(map[string]any)
	if !ok {
		return fmt.Sprintf("%s is not an object", pathOrTop(path))
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "..." {
			continue
		}
		v, ok := g[k]
		if !ok {
			return fmt.Sprintf("%s.%s is missing", path, k)
		}
		if volatileKey(k) {
			continue
		}
		if d := matchJSON(want[k], v, path+"."+k); d != "" {
			return d
		}
	}
	return ""
}

func matchArray(want []any, got any, path string) string {
	g, ok := got.([]any)
	if !ok {
		return fmt.Sprintf("%s is not an array", pathOrTop(path))
	}
	rest := len(want) > 0 && want[len(want)-1] == "..."
	if rest {
		want = want[:len(want)-1]
	}
	if len(g) < len(want) || (!rest && len(g) != len(want)) {
		return fmt.Sprintf("%s has %d elements, the page shows %d", pathOrTop(path), len(g), len(want))
	}
	for i, w := range want {
		if d := matchJSON(w, g[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
			return d
		}
	}
	return ""
}

func pathOrTop(path string) string {
	if path == "" {
		return "the output"
	}
	return path
}

// checkOutput compares what a command printed with what the page shows,
// and returns how they differ, or "".
func checkOutput(c docCmd, stdout string, port int) string {
	if !c.hasWant {
		return ""
	}
	if c.wantJSON != "" {
		want, err := parseJSONPattern(withPort(c.wantJSON, port))
		if err != nil {
			return err.Error()
		}
		dec := json.NewDecoder(strings.NewReader(stdout))
		dec.UseNumber()
		var got any
		if err := dec.Decode(&got); err != nil {
			return fmt.Sprintf("the page shows JSON, the command printed %q", stdout)
		}
		return matchJSON(want, got, "")
	}
	want := make([]string, len(c.wantText))
	for i, l := range c.wantText {
		want[i] = withPort(l, port)
	}
	if !matchText(want, stdout) {
		return fmt.Sprintf("the page shows\n%s\nthe command printed\n%s", strings.Join(want, "\n"), stdout)
	}
	return ""
}
