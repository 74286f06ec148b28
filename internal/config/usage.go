package config

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

//go:generate go test -run TestReferenceIsCurrent -update .

// width is the columns help text fits in: a terminal's default, and what
// a mail or a code review shows without wrapping.
const width = 80

// indent is how far a setting's meaning stands under its name.
const indent = "    "

// usageHeader is the start of toolsvc -h, before the settings: the
// commands, laid out by hand, then paragraphs that are wrapped to width.
const usageHeader = `toolsvc serves CountBot's agent tools over HTTP/JSON.

Usage: toolsvc [-h] [-version]
       toolsvc help [GROUP|all]
       toolsvc version
       toolsvc health [-timeout 5s]
       toolsvc drain [-settle 5s] [-timeout 50s]
       toolsvc audit verify|tail|show|grep [flags] [DATA_DIR]
`

// usageParagraphs follow the commands in toolsvc -h: what each command
// does, and how settings are given.
var usageParagraphs = []string{
	`-h and "toolsvc help" print this text. -version and "toolsvc version" print the version (a git tag, git describe or a Go pseudo-version). "toolsvc health" asks the service at TOOLSVC_ADDR for GET /healthz and exits 0 when it answers ok, 1 otherwise (a container's health check). "toolsvc drain" waits -settle, then until that service runs no tool call (GET /readyz's in_flight), and exits 0, or 1 after -timeout (a pre-stop hook: the SIGTERM that follows cancels the calls still running). "toolsvc audit" reads DATA_DIR/audit_logs offline: verify checks its hash chain and signed digests, tail [-f], show CALL_ID and grep print records (toolsvc audit -h, docs/audit.md).`,
	configRules + ` The start-up log has one line per tool: tool=<name> state=on|off reason=...`,
}

// configRules is what toolsvc -h and toolsvc help all say of settings in
// general, valueRules what help all says of their values (the same as
// docs/configuration.md, which says it in Markdown).
const (
	configRules = `It is configured through TOOLSVC_* environment variables only. A value that does not parse or make sense stops start-up with a message naming the variable, and so does a TOOLSVC_* variable that is no setting, with the nearest name (TOOLSVC_TEST_* is left to tests).`
	valueRules  = `Durations are Go durations (30s, 2m). Lists are comma-separated. Pattern lists take one regular expression per line, or comma-separated when the value has no newline. Memory sizes are bytes, or a number with KiB, MiB or GiB. Keys, tokens and secrets are never logged, audited or passed to commands.`
)

// Usage writes toolsvc -h: the commands, then the settings a first-time
// user sets (those with a brief), by group, each with its default and
// brief, and last the groups, which toolsvc help GROUP prints in full.
func Usage(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(usageHeader)
	for _, p := range usageParagraphs {
		bw.WriteString("\n")
		hang(bw, "", "", p)
	}
	secs := Sections()
	writeCommon(bw, secs)
	writeGroupList(bw, secs)
	return bw.Flush()
}

// Help writes what toolsvc help TOPIC prints: for "" what -h prints, for
// "all" every group in full, else the group TOPIC names (in any case).
// Another TOPIC is an *UnknownGroupError, and nothing is written.
func Help(w io.Writer, topic string) error {
	if topic == "" {
		return Usage(w)
	}
	secs := Sections()
	bw := bufio.NewWriter(w)
	if strings.EqualFold(topic, "all") {
		hang(bw, "", "", "Every setting, group by group (toolsvc -h lists the common ones, toolsvc help GROUP one group; docs/configuration.md has them too). "+configRules)
		bw.WriteString("\n")
		hang(bw, "", "", valueRules)
		for _, sec := range secs {
			bw.WriteString("\n")
			writeGroup(bw, sec)
		}
		return bw.Flush()
	}
	names := make([]string, len(secs))
	for i, sec := range secs {
		if strings.EqualFold(topic, sec.Name) {
			writeGroup(bw, sec)
			return bw.Flush()
		}
		names[i] = sec.Name
	}
	// A setting's name, with or without the prefix, points to its group.
	setting := strings.ToUpper(topic)
	if !strings.HasPrefix(setting, Prefix+"_") {
		setting = Prefix + "_" + setting
	}
	for _, sec := range secs {
		for _, s := range sec.Settings {
			if s.Name == setting {
				return &UnknownGroupError{Name: topic, Setting: s.Name, Nearest: sec.Name, Groups: names}
			}
		}
	}
	return &UnknownGroupError{Name: topic, Nearest: Nearest(topic, append(names, "all")), Groups: names}
}

// UnknownGroupError is toolsvc help's answer to a name that is no group.
type UnknownGroupError struct {
	Name    string   // as given
	Setting string   // the setting Name names, if it names one
	Nearest string   // that setting's group, else the group (or "all") closest to Name, or "" if none is near
	Groups  []string // every group's name, in order
}

// Error names the group asked for, the nearest one and all of them, in
// lines that fit in width.
func (e *UnknownGroupError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no settings group %q", e.Name)
	if e.Setting != "" {
		fmt.Fprintf(&b, "\n%s is in the group %s: toolsvc help %s", e.Setting, e.Nearest, e.Nearest)
	} else if e.Nearest != "" {
		fmt.Fprintf(&b, "; did you mean %s?", e.Nearest)
	}
	b.WriteString("\n")
	bw := bufio.NewWriter(&b)
	hang(bw, "", "", "The groups: "+strings.Join(e.Groups, ", ")+"; all prints every one, and toolsvc -h the common settings.")
	bw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// writeGroup writes one group in full: its heading and text, then each
// setting's name and default, and under them its meaning, wrapped.
func writeGroup(w *bufio.Writer, sec Section) {
	fmt.Fprintf(w, "%s (toolsvc help %s):\n", sec.Title, sec.Name)
	hang(w, "", "", sec.Doc)
	w.WriteString("\n")
	for _, s := range sec.Settings {
		w.WriteString(s.Name)
		if d := defaultOf(s); d != "-" {
			w.WriteString(" (default " + d + ")")
		}
		w.WriteString("\n")
		hang(w, indent, indent, s.Desc)
	}
}

// writeCommon writes the settings that have a brief, under their groups'
// titles, in aligned columns: name, default, brief.
func writeCommon(w *bufio.Writer, secs []Section) {
	nameW, defW := 0, 0
	for _, sec := range secs {
		for _, s := range sec.Settings {
			if s.Brief != "" {
				nameW, defW = max(nameW, len(s.Name)), max(defW, len(defaultOf(s)))
			}
		}
	}
	w.WriteString("\n")
	w.WriteString("The settings most often set, by group, with their defaults (-: none):\n")
	for _, sec := range secs {
		title := false
		for _, s := range sec.Settings {
			if s.Brief == "" {
				continue
			}
			if !title {
				fmt.Fprintf(w, "%s (help %s)\n", sec.Title, sec.Name)
				title = true
			}
			first := fmt.Sprintf("  %-*s  %-*s  ", nameW, s.Name, defW, defaultOf(s))
			hang(w, first, strings.Repeat(" ", len(first)), s.Brief)
		}
	}
}

// writeGroupList ends -h: the groups' names and titles in two columns,
// down the first, then down the second.
func writeGroupList(w *bufio.Writer, secs []Section) {
	w.WriteString("\n")
	hang(w, "", "", "The groups: toolsvc help GROUP prints one in full, toolsvc help all every setting (docs/configuration.md lists them too).")
	rows := (len(secs) + 1) / 2
	nameW, titleW := 0, 0
	for i, sec := range secs {
		nameW = max(nameW, len(sec.Name))
		if i < rows {
			titleW = max(titleW, len(sec.Title))
		}
	}
	for r := range rows {
		left := secs[r]
		line := fmt.Sprintf("  %-*s  %-*s", nameW, left.Name, titleW, left.Title)
		if r+rows < len(secs) {
			right := secs[r+rows]
			line += fmt.Sprintf("  %-*s  %s", nameW, right.Name, right.Title)
		}
		w.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}

// defaultOf is a setting's default as help shows it: "-" for none.
func defaultOf(s Setting) string {
	if !s.HasDefault || s.Default == "" {
		return "-"
	}
	return s.Default
}

// hang writes text wrapped to width: the first line after first, the
// others after rest (a hanging indent when rest is longer). Words are
// never cut, so a word longer than a line stands on a line of its own.
func hang(w *bufio.Writer, first, rest, text string) {
	prefix := first
	line := 0 // the current line's length; 0: no word on it yet
	for _, word := range strings.Fields(text) {
		switch {
		case line == 0:
			w.WriteString(prefix + word)
			line = len(prefix) + len(word)
		case line+1+len(word) <= width:
			w.WriteString(" " + word)
			line += 1 + len(word)
		default:
			prefix = rest
			w.WriteString("\n" + prefix + word)
			line = len(prefix) + len(word)
		}
	}
	w.WriteString("\n")
}

const referenceHeader = `<!-- Generated from internal/config (the Config struct's tags) by
     go generate ./internal/config; edit the tags, not this file. -->

# Configuration

toolsvc is configured through ` + "`TOOLSVC_*`" + ` environment variables only;
` + "`toolsvc help all`" + ` prints the same list, ` + "`toolsvc help GROUP`" + ` one
section (its group is named under its heading) and ` + "`toolsvc -h`" + ` the
settings most often set. A value that does not parse or make sense stops
start-up with a message naming the variable, and so does a ` + "`TOOLSVC_*`" + `
variable that is no setting, with the nearest name (` + "`TOOLSVC_TEST_*`" + ` is
left to tests).

Durations are Go durations (` + "`30s`, `2m`" + `). Lists are comma-separated.
Pattern lists take one regular expression per line, or comma-separated when
the value has no newline. Memory sizes are bytes, or a number with KiB, MiB
or GiB. Keys, tokens and secrets are never logged, audited or passed to
commands.
`

// Reference writes docs/configuration.md: every variable with its default
// and meaning, under a heading per section, from the same tags as Usage.
func Reference(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(referenceHeader)
	for _, sec := range Sections() {
		fmt.Fprintf(bw, "\n## %s\n\n%s `toolsvc help %s` prints this section.\n\n| variable | default | meaning |\n|---|---|---|\n", sec.Title, sec.Doc, sec.Name)
		for _, s := range sec.Settings {
			def := "–"
			if s.HasDefault && s.Default != "" {
				def = "`" + s.Default + "`"
			}
			fmt.Fprintf(bw, "| `%s` | %s | %s |\n", s.Name, def, markdownCell(s.Desc))
		}
	}
	return bw.Flush()
}

// markdownCell keeps a description inside its table cell: a "|" would end
// it, a "*" could start emphasis across words, a "<" a tag.
func markdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "*", `\*`, "<", "&lt;").Replace(s)
}
