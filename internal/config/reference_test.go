package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the Config struct")

// TestReferenceIsCurrent keeps docs/configuration.md what Reference
// writes from the struct tags. After changing a setting, run
// go generate ./internal/config (or this test with -update).
func TestReferenceIsCurrent(t *testing.T) {
	var buf bytes.Buffer
	if err := Reference(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "configuration.md")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf.Bytes()) {
		t.Errorf("%s is out of date: run go generate ./internal/config", path)
	}
	// Every variable has its row, and every section its heading.
	for _, sec := range Sections() {
		if !bytes.Contains(got, []byte("\n## "+sec.Title+"\n")) {
			t.Errorf("no heading for %s", sec.Title)
		}
		for _, s := range sec.Settings {
			if !bytes.Contains(got, []byte("| `"+s.Name+"` | ")) {
				t.Errorf("no row for %s", s.Name)
			}
		}
	}
}

// TestSectionsComplete: Config is made of sections only, each with a
// heading and a text, and every variable has a name of its own, a
// description, and a default that parses.
func TestSectionsComplete(t *testing.T) {
	ct := reflect.TypeFor[Config]()
	for i := 0; i < ct.NumField(); i++ {
		f := ct.Field(i)
		if !f.Anonymous || f.Type.Kind() != reflect.Struct || f.Tag.Get("section") == "" || f.Tag.Get("doc") == "" {
			t.Errorf("Config field %s is no embedded section with section and doc tags", f.Name)
		}
	}
	seen := map[string]bool{}
	name := regexp.MustCompile(`^TOOLSVC_[A-Z][A-Z0-9_]*$`)
	n := 0
	for _, s := range settings() {
		n++
		if !name.MatchString(s.Name) || seen[s.Name] {
			t.Errorf("%q: no env tag, or a name given twice", s.Name)
		}
		seen[s.Name] = true
		if strings.TrimSpace(s.Desc) == "" {
			t.Errorf("%s has no description", s.Name)
		}
	}
	if n < 80 {
		t.Errorf("only %d settings", n)
	}
}

// TestUsageBySection: toolsvc -h lists every variable once, under its
// section's heading, with the description docs/configuration.md has.
func TestUsageBySection(t *testing.T) {
	var buf bytes.Buffer
	if err := Usage(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, sec := range Sections() {
		at := strings.Index(out, "\n"+sec.Title+":\n")
		if at < 0 {
			t.Errorf("-h has no heading %q", sec.Title)
			continue
		}
		for _, s := range sec.Settings {
			re := regexp.MustCompile(`(?m)^` + s.Name + ` +\S+ +` + regexp.QuoteMeta(s.Desc) + `$`)
			loc := re.FindAllStringIndex(out, -1)
			if len(loc) != 1 || loc[0][0] < at {
				t.Errorf("-h lists %s %d times, or not under %q", s.Name, len(loc), sec.Title)
			}
		}
	}
	for _, want := range []string{"TOOLSVC_ADDR", "127.0.0.1:8080", "-version", "toolsvc health"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
}
