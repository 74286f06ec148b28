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
	// toolsvc help GROUP takes a group's name: one lower-case word, not
	// "all", which means every group.
	groups := map[string]bool{}
	groupName := regexp.MustCompile(`^[a-z]+$`)
	for _, sec := range Sections() {
		if !groupName.MatchString(sec.Name) || sec.Name == "all" || groups[sec.Name] {
			t.Errorf("section %q: group %q is no lower-case word, is all, or is taken", sec.Title, sec.Name)
		}
		groups[sec.Name] = true
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

// TestValidateEverySection: one bad value in each section that has
// checks, all reported at once, each naming its variable.
func TestValidateEverySection(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{
		"WORKSPACE": dir + "/ws", "DATA_DIR": dir + "/data",
		"ADDR":                   "nonsense",        // Access
		"LOG_LEVEL":              "loud",            // Server
		"MAX_CONCURRENT_CALLS":   "0",               // Calls
		"AUDIT_RETENTION_DAYS":   "-1",              // Audit
		"SEARCH_WORKERS":         "999",             // Files
		"FETCH_MAX_REDIRECTS":    "21",              // Web
		"SCREENSHOT_MAX_PAGES":   "0",               // Screenshot
		"EXEC_SANDBOX":           "jail",            // Exec
		"AGENT_MAX_TURNS":        "0",               // Agents
		"TELEGRAM_BASE_URL":      "ftp://t.example", // Channels
		"EXEC_MAX_TIMEOUT":       "1s",
		"XIAOZHI_CONVERSATION":   "true",
		"DINGTALK_ROBOT_CODE":    "r",
		"AUDIT_MAX_RESULT_CHARS": "0",
	}
	_, err := LoadFrom(mapLookup(vars))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`TOOLSVC_ADDR: "nonsense" is not host:port`,
		`TOOLSVC_LOG_LEVEL: "loud" is not one of debug, info, warn, error`,
		"TOOLSVC_MAX_CONCURRENT_CALLS: must be greater than zero",
		"TOOLSVC_AUDIT_RETENTION_DAYS: must be zero (keep all) or more",
		"TOOLSVC_AUDIT_MAX_RESULT_CHARS: must be greater than zero",
		"TOOLSVC_SEARCH_WORKERS: must be between 0 (one per CPU) and 256",
		"TOOLSVC_FETCH_MAX_REDIRECTS: must be between 0 and 20",
		"TOOLSVC_SCREENSHOT_MAX_PAGES: must be between 1 and 32",
		`TOOLSVC_EXEC_SANDBOX: "jail" is not one of auto, landlock, bwrap, none`,
		"TOOLSVC_EXEC_MAX_TIMEOUT: must be at least TOOLSVC_EXEC_TIMEOUT (30s)",
		"TOOLSVC_AGENT_MAX_TURNS: must be between 1 and 200",
		"TOOLSVC_XIAOZHI_CONVERSATION: send_message needs a model",
		"TOOLSVC_TELEGRAM_BASE_URL: is not an http(s) URL without credentials",
		`TOOLSVC_DINGTALK_ROBOT_CODE: account "default" has no TOOLSVC_DINGTALK_CLIENT_ID`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
}
