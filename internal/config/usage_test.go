package config

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// help returns what toolsvc help topic prints.
func help(t *testing.T, topic string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Help(&buf, topic); err != nil {
		t.Fatalf("help %q: %v", topic, err)
	}
	return buf.String()
}

// topics are every argument toolsvc help takes: none (-h), each group,
// and all.
func topics() []string {
	out := []string{"", "all"}
	for _, sec := range Sections() {
		out = append(out, sec.Name)
	}
	return out
}

// TestHelpFitsTerminal: every line of -h and of toolsvc help GROUP fits
// in 80 columns, without trailing blanks.
func TestHelpFitsTerminal(t *testing.T) {
	for _, topic := range topics() {
		t.Run("help "+topic, func(t *testing.T) {
			out := help(t, topic)
			if !strings.HasSuffix(out, "\n") {
				t.Error("the last line has no newline")
			}
			for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if n := utf8.RuneCountInString(line); n > width {
					t.Errorf("line %d is %d columns wide: %q", i+1, n, line)
				}
				if strings.TrimRight(line, " ") != line {
					t.Errorf("line %d ends in blanks: %q", i+1, line)
				}
			}
		})
	}
}

// TestUsageIsShort: -h fits on a screen or two, lists the settings that
// have a brief, under their groups, and ends with every group's name.
func TestUsageIsShort(t *testing.T) {
	var buf bytes.Buffer
	if err := Usage(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if out != help(t, "") {
		t.Error("toolsvc help without a group prints other than -h")
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) > 60 {
		t.Errorf("-h has %d lines; keep it to 60 and leave the rest to toolsvc help GROUP", len(lines))
	}
	briefs := 0
	for _, sec := range Sections() {
		head := strings.Index(out, "\n"+sec.Title+" (help "+sec.Name+")\n")
		for _, s := range sec.Settings {
			if s.Brief == "" {
				if strings.Contains(out, s.Name+" ") {
					t.Errorf("-h lists %s, which has no brief", s.Name)
				}
				continue
			}
			briefs++
			at := strings.Index(out, "\n  "+s.Name+" ")
			if head < 0 || at < head || !strings.Contains(out[at:], s.Brief+"\n") {
				t.Errorf("-h lacks %s with its brief %q under %q", s.Name, s.Brief, sec.Title)
			}
		}
	}
	if briefs < 8 {
		t.Errorf("-h lists %d settings; a first-time user needs more", briefs)
	}
	list := out[strings.LastIndex(out, "\n\n"):]
	for _, sec := range Sections() {
		if !strings.Contains(list, "  "+sec.Name+" ") {
			t.Errorf("the groups at the end of -h lack %s:\n%s", sec.Name, list)
		}
	}
	for _, want := range []string{"-version", "toolsvc health", "toolsvc help [GROUP|all]", "toolsvc help all"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
}

// TestHelpHasEverySetting: each setting is in exactly one group's help,
// its own, and in help all, with its default and the whole of its meaning
// (wrapped, never cut).
func TestHelpHasEverySetting(t *testing.T) {
	all := help(t, "all")
	flatAll := strings.Join(strings.Fields(all), " ")
	groups := map[string]string{}
	for _, sec := range Sections() {
		groups[sec.Name] = help(t, sec.Name)
		if !strings.Contains(flatAll, strings.Join(strings.Fields(sec.Doc), " ")) {
			t.Errorf("help all lacks the text of %q", sec.Title)
		}
	}
	for _, sec := range Sections() {
		for _, s := range sec.Settings {
			head := s.Name + "\n"
			if d := defaultOf(s); d != "-" {
				head = s.Name + " (default " + s.Default + ")\n"
			}
			entry := head + indent
			in := 0
			for name, out := range groups {
				if strings.Count(out, entry) > 1 || (strings.Contains(out, entry) != (name == sec.Name)) {
					t.Errorf("%s: help %s has it %d times", s.Name, name, strings.Count(out, entry))
				}
				if strings.Contains(out, "\n"+s.Name+" ") || strings.Contains(out, "\n"+s.Name+"\n") {
					in++
				}
			}
			if in != 1 {
				t.Errorf("%s is in %d groups' help; want 1", s.Name, in)
			}
			if strings.Count(all, "\n"+entry) != 1 {
				t.Errorf("help all has %q %d times; want once", entry, strings.Count(all, "\n"+entry))
			}
			if !strings.Contains(flatAll, s.Name) || !strings.Contains(flatAll, strings.Join(strings.Fields(s.Desc), " ")) {
				t.Errorf("help all lacks %s's meaning, whole: %q", s.Name, s.Desc)
			}
		}
	}
	if got := strings.ToUpper(help(t, "EXEC")); got != strings.ToUpper(groups["exec"]) {
		t.Error("help EXEC differs from help exec")
	}
}

// TestHelpUnknownGroup: a name that is no group writes nothing and says
// which groups there are and the nearest, when one is near.
func TestHelpUnknownGroup(t *testing.T) {
	for _, tt := range []struct{ topic, nearest string }{
		{"exce", "exec"},
		{"agent", "agents"},
		{"al", "all"},
		{"nonsense", ""},
		{"TOOLSVC_EXEC_SANDBOX", "exec"},
		{"llm_model", "agents"},
	} {
		var buf bytes.Buffer
		err := Help(&buf, tt.topic)
		ug, ok := errors.AsType[*UnknownGroupError](err)
		if !ok {
			t.Errorf("help %s: %v; want an UnknownGroupError", tt.topic, err)
			continue
		}
		if buf.Len() != 0 {
			t.Errorf("help %s wrote %q", tt.topic, buf.String())
		}
		msg := err.Error()
		hint := "did you mean " + tt.nearest + "?"
		if ug.Setting != "" {
			hint = "is in the group " + tt.nearest + ": toolsvc help " + tt.nearest
		}
		if ug.Nearest != tt.nearest || strings.Contains(msg, hint) != (tt.nearest != "") ||
			!strings.Contains(msg, `no settings group "`+tt.topic+`"`) {
			t.Errorf("help %s: nearest %q; want %q: %s", tt.topic, ug.Nearest, tt.nearest, msg)
		}
		for _, sec := range Sections() {
			if !strings.Contains(msg, sec.Name) {
				t.Errorf("help %s: the message lacks the group %s: %s", tt.topic, sec.Name, msg)
			}
		}
		// toolsvc help prints it after "toolsvc help: ".
		for _, line := range strings.Split("toolsvc help: "+msg, "\n") {
			if len(line) > width {
				t.Errorf("help %s: a line of the message is over %d columns: %q", tt.topic, width, line)
			}
		}
	}
}

// TestHang: words wrap at width with the indent given, and a word longer
// than a line is kept whole on a line of its own.
func TestHang(t *testing.T) {
	long := strings.Repeat("x", 90)
	for _, tt := range []struct{ first, rest, text, want string }{
		{"", "", "a b", "a b\n"},
		{"  ", "    ", strings.Repeat("word ", 20), "  " + strings.TrimSpace(strings.Repeat("word ", 15)) + "\n    " + strings.TrimSpace(strings.Repeat("word ", 5)) + "\n"},
		{"- ", "  ", "a " + long + " b", "- a\n  " + long + "\n  b\n"},
		{"", "", "", "\n"},
	} {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		hang(w, tt.first, tt.rest, tt.text)
		w.Flush()
		if buf.String() != tt.want {
			t.Errorf("hang(%q, %q, %q) =\n%q\nwant\n%q", tt.first, tt.rest, tt.text, buf.String(), tt.want)
		}
	}
}
