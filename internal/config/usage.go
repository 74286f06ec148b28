package config

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

//go:generate go test -run TestReferenceIsCurrent -update .

const usageHeader = `toolsvc serves CountBot's agent tools over HTTP/JSON.

Usage: toolsvc [-h] [-version]
       toolsvc version
       toolsvc health [-timeout 5s]
       toolsvc drain [-settle 5s] [-timeout 50s]
       toolsvc audit verify|tail|show|grep [flags] [DATA_DIR]

-h prints this text; -version and "toolsvc version" print the version (a
git tag, git describe or a Go pseudo-version). "toolsvc health" asks the
service at TOOLSVC_ADDR for GET /healthz and exits 0 when it answers ok, 1
otherwise (a container's health check). "toolsvc drain" waits -settle, then
until that service runs no tool call (GET /readyz's in_flight), and exits 0,
or 1 after -timeout (a pre-stop hook: the SIGTERM that follows cancels the
calls still running). "toolsvc audit" reads DATA_DIR/audit_logs offline:
verify checks its hash chain and signed digests, tail [-f], show CALL_ID and
grep print records (toolsvc audit -h, docs/audit.md).

It is configured through the environment only. A TOOLSVC_* variable that is
not listed here stops start-up, with the nearest name (TOOLSVC_TEST_* is
left to tests). The start-up log has one line per tool: tool=<name>
state=on|off reason=... docs/configuration.md has this list too.
`

// Usage writes every variable with its default and meaning, section by
// section.
func Usage(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(usageHeader)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	for _, sec := range Sections() {
		fmt.Fprintf(tw, "\n%s:\nVARIABLE\tDEFAULT\tMEANING\n", sec.Title)
		for _, s := range sec.Settings {
			def := s.Default
			if !s.HasDefault || def == "" {
				def = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, def, s.Desc)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

const referenceHeader = `<!-- Generated from internal/config (the Config struct's tags) by
     go generate ./internal/config; edit the tags, not this file. -->

# Configuration

toolsvc is configured through ` + "`TOOLSVC_*`" + ` environment variables only;
` + "`toolsvc -h`" + ` prints the same list. A value that does not parse or make
sense stops start-up with a message naming the variable, and so does a
` + "`TOOLSVC_*`" + ` variable that is no setting, with the nearest name
(` + "`TOOLSVC_TEST_*`" + ` is left to tests).

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
		fmt.Fprintf(bw, "\n## %s\n\n%s\n\n| variable | default | meaning |\n|---|---|---|\n", sec.Title, sec.Doc)
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
