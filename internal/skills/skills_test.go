package skills

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// newLoader returns a loader over a workspace holding files (path ->
// content), where only the programs "git" and "jq" exist and only HOME and
// API_TOKEN are set.
func newLoader(t *testing.T, files map[string]string, disabled ...string) (*Loader, string) {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	l := New(root, disabled)
	l.lookPath = func(b string) (string, error) {
		if b == "git" || b == "jq" {
			return "/usr/bin/" + b, nil
		}
		return "", errors.New("not found")
	}
	l.lookupEnv = func(e string) (string, bool) {
		if e == "HOME" || e == "API_TOKEN" {
			return "secret-value", true
		}
		return "", false
	}
	return l, dir
}

func TestLoadFrontMatter(t *testing.T) {
	cases := []struct {
		name, md string
		want     Skill
	}{
		{"json metadata as countbot writes it", "---\nname: weather\ntitle: Weather\ndescription: Get the forecast\nmetadata: {\"CountBot\": {\"requires\": {\"bins\": [\"curl\", \"jq\"], \"env\": [\"WEATHER_KEY\"]}}}\n---\n# Weather\n",
			Skill{Title: "Weather", Description: "Get the forecast", Enabled: true, Missing: Missing{Bins: []string{"curl"}, Env: []string{"WEATHER_KEY"}}}},
		{"json metadata in a quoted string", "---\ntitle: T\nmetadata: '{\"CountBot\":{\"requires\":{\"bins\":[\"git\"]}}}'\n---\n",
			Skill{Title: "T", Enabled: true, Available: true, Missing: Missing{Bins: []string{}, Env: []string{}}}},
		{"yaml metadata", "---\ntitle: T\nalways: true\nmetadata:\n  countbot:\n    requires:\n      bins: [git, rg]\n      env: [API_TOKEN]\n---\n",
			Skill{Title: "T", Always: true, Enabled: true, Missing: Missing{Bins: []string{"rg"}, Env: []string{}}}},
		{"single strings", "---\nmetadata:\n  CountBot:\n    requires: {bins: ffmpeg, env: NOPE}\n---\n",
			Skill{Title: "s", Enabled: true, Missing: Missing{Bins: []string{"ffmpeg"}, Env: []string{"NOPE"}}}},
		{"always as a string", "---\nalways: \"true\"\n---\n", Skill{Title: "s", Always: true, Enabled: true, Available: true, Missing: Missing{Bins: []string{}, Env: []string{}}}},
		{"name as title", "---\nname: Nice Name\n---\n", Skill{Title: "Nice Name", Enabled: true, Available: true, Missing: Missing{Bins: []string{}, Env: []string{}}}},
		{"crlf and bom", "\ufeff---\r\ntitle: T\r\ndescription: D\r\n---\r\nbody", Skill{Title: "T", Description: "D", Enabled: true, Available: true, Missing: Missing{Bins: []string{}, Env: []string{}}}},
		{"no front matter", "# Just markdown\n", Skill{Title: "s", Enabled: true, Available: true, Missing: Missing{Bins: []string{}, Env: []string{}}}},
		{"other metadata keys ignored", "---\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"nope\"]}}}\n---\n", Skill{Title: "s", Enabled: true, Available: true, Missing: Missing{Bins: []string{}, Env: []string{}}}},
		{"paths are not program names", "---\nmetadata: {\"CountBot\": {\"requires\": {\"bins\": [\"/etc/passwd\", \"../x\"], \"env\": [\"A=B\"]}}}\n---\n",
			Skill{Title: "s", Enabled: true, Missing: Missing{Bins: []string{"/etc/passwd", "../x"}, Env: []string{"A=B"}}}},
		{"broken yaml", "---\ntitle: [unclosed\n---\n", Skill{Title: "s", Enabled: true, Missing: Missing{Bins: []string{}, Env: []string{}}, Error: "front matter:"}},
		{"unclosed front matter", "---\ntitle: T\n", Skill{Title: "s", Enabled: true, Missing: Missing{Bins: []string{}, Env: []string{}}, Error: "no closing '---'"}},
		{"bad json metadata", "---\nmetadata: '{\"CountBot\": '\n---\n", Skill{Title: "s", Enabled: true, Missing: Missing{Bins: []string{}, Env: []string{}}, Error: "not a JSON object"}},
		{"bad always", "---\nalways: maybe\n---\n", Skill{Title: "s", Enabled: true, Missing: Missing{Bins: []string{}, Env: []string{}}, Error: "not true or false"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := newLoader(t, map[string]string{"skills/s/SKILL.md": c.md})
			got, ok := l.Load("s")
			if !ok {
				t.Fatal("not found")
			}
			c.want.Name = "s"
			if c.want.Error != "" {
				if !strings.Contains(got.Error, c.want.Error) {
					t.Errorf("error %q, want it to contain %q", got.Error, c.want.Error)
				}
				got.Error, c.want.Error = "", ""
			}
			if !equal(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func equal(a, b Skill) bool {
	return a.Name == b.Name && a.Title == b.Title && a.Description == b.Description && a.Always == b.Always &&
		a.Enabled == b.Enabled && a.Available == b.Available && a.Error == b.Error &&
		strings.Join(a.Missing.Bins, ",") == strings.Join(b.Missing.Bins, ",") && strings.Join(a.Missing.Env, ",") == strings.Join(b.Missing.Env, ",") &&
		a.Missing.Bins != nil && a.Missing.Env != nil
}

func TestList(t *testing.T) {
	l, dir := newLoader(t, map[string]string{
		"skills/zeta/SKILL.md":      "---\ntitle: Zeta\n---\n",
		"skills/alpha/SKILL.md":     "---\ntitle: Alpha\n---\n",
		"skills/broken/SKILL.md":    "---\n: : :\n---\n",
		"skills/notes/README.md":    "not a skill",
		"skills/file.md":            "not a folder",
		"skills/Weather/SKILL.md":   "---\ntitle: W\n---\n",
		"elsewhere/linked/SKILL.md": "---\ntitle: Linked\n---\n",
	}, "weather")
	os.Symlink("../elsewhere/linked", filepath.Join(dir, "skills", "linked"))
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "SKILL.md"), []byte("---\ntitle: Outside\n---\n"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "skills", "escape"))
	list, err := l.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
		switch s.Name {
		case "Weather":
			if s.Enabled || s.Available {
				t.Errorf("disabled skill (case-insensitive) listed as enabled: %+v", s)
			}
		case "broken":
			if s.Error == "" || s.Available {
				t.Errorf("broken skill: %+v", s)
			}
		case "linked":
			if s.Title != "Linked" {
				t.Errorf("linked skill: %+v", s)
			}
		}
	}
	if got := strings.Join(names, ","); got != "Weather,alpha,broken,linked,zeta" {
		t.Errorf("names %s", got)
	}
}

func TestListWithoutSkillsFolder(t *testing.T) {
	l, _ := newLoader(t, nil)
	list, err := l.List()
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("list %v err %v, want an empty list", list, err)
	}
	l, _ = newLoader(t, map[string]string{"skills": "a file"})
	if list, err := l.List(); err != nil || len(list) != 0 {
		t.Fatalf("skills as a file: %v %v", list, err)
	}
}

func TestCheckSkill(t *testing.T) {
	l, dir := newLoader(t, map[string]string{
		"skills/ok/SKILL.md":      "---\nmetadata: {\"CountBot\": {\"requires\": {\"bins\": [\"git\"], \"env\": [\"API_TOKEN\"]}}}\n---\n",
		"skills/off/SKILL.md":     "---\ntitle: Off\n---\n",
		"skills/needs/SKILL.md":   "---\nmetadata: {\"CountBot\": {\"requires\": {\"bins\": [\"ffmpeg\", \"git\"], \"env\": [\"OPENAI_API_KEY\", \"API_TOKEN\"]}}}\n---\n",
		"skills/broken/SKILL.md":  "---\ntitle: [\n---\n",
		"skills/envonly/SKILL.md": "---\nmetadata: {\"CountBot\": {\"requires\": {\"env\": [\"NOPE\"]}}}\n---\n",
	}, "off")
	if err := mkfifo(filepath.Join(dir, "skills", "fifo"), 0o644); err == nil {
		os.Mkdir(filepath.Join(dir, "skills", "pipe"), 0o755)
		if err := mkfifo(filepath.Join(dir, "skills", "pipe", "SKILL.md"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, notice, code string
		absent             []string
	}{
		{name: "ok"},
		{name: "off", code: toolerr.PolicyDenied},
		{name: "OFF", code: toolerr.PolicyDenied},
		{name: "needs", notice: "programs not found on PATH: ffmpeg; environment variables not set: OPENAI_API_KEY", absent: []string{"git", "API_TOKEN", "secret-value"}},
		{name: "envonly", notice: "[Skill 'envonly' is not available here: environment variables not set: NOPE."},
		{name: "broken", notice: "could not be read"},
		{name: "pipe", notice: "not a regular file"},
		{name: "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			notice, err := l.CheckSkill(nil, c.name)
			if c.code != "" {
				if toolerr.ErrorCode(err) != c.code || err.Error() != "Skill '"+c.name+"' is disabled. Enable it first." {
					t.Fatalf("err %v, want %s", err, c.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.notice == "") != (notice == "") || !strings.Contains(notice, c.notice) {
				t.Errorf("notice %q, want %q", notice, c.notice)
			}
			for _, a := range c.absent {
				if strings.Contains(notice, a) {
					t.Errorf("notice names %q: %s", a, notice)
				}
			}
		})
	}
}

func TestRealLookups(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "skills", "s"), 0o755)
	os.WriteFile(filepath.Join(dir, "skills", "s", "SKILL.md"), []byte("---\nmetadata: {\"CountBot\": {\"requires\": {\"bins\": [\"sh\", \"no-such-program-xyz\"], \"env\": [\"SKILLS_TEST_SET\", \"SKILLS_TEST_UNSET\"]}}}\n---\n"), 0o644)
	t.Setenv("SKILLS_TEST_SET", "x")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s, _ := New(root, nil).Load("s")
	if strings.Join(s.Missing.Bins, ",") != "no-such-program-xyz" || strings.Join(s.Missing.Env, ",") != "SKILLS_TEST_UNSET" {
		t.Errorf("missing %+v", s.Missing)
	}
}
