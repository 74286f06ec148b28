package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// skillsWorkspace writes the skills the tests use: one usable, one whose
// program and variable are missing, one disabled, one with broken front
// matter, and one that is usable because its variable is set.
func skillsWorkspace(t *testing.T, s *testServer) {
	t.Helper()
	s.writeWS(t, "skills/ready/SKILL.md", "---\ntitle: Ready\ndescription: Needs only sh\nalways: true\n"+
		"metadata: {\"CountBot\": {\"requires\": {\"bins\": [\"sh\"], \"env\": [\"SKILLS_E2E_TOKEN\"]}}}\n---\n# Ready\nRun `sh`.\n")
	s.writeWS(t, "skills/needs/SKILL.md", "---\ntitle: Needs tools\ndescription: Converts video\n"+
		"metadata:\n  CountBot:\n    requires:\n      bins: [sh, no-such-program-e2e]\n      env: [SKILLS_E2E_UNSET, SKILLS_E2E_TOKEN]\n---\n# Needs\nbody line\n")
	s.writeWS(t, "skills/off/SKILL.md", "---\ntitle: Off\ndescription: Disabled by the operator\n---\n# Off\n")
	s.writeWS(t, "skills/broken/SKILL.md", "---\ntitle: [unclosed\n---\n# Broken\n")
	s.writeWS(t, "skills/plain/SKILL.md", "# No front matter\n")
	s.writeWS(t, "skills/empty-folder/notes.txt", "not a skill")
}

func TestSkillsThroughReadFile(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"SKILLS_DISABLED": "off,other"}, withEnv("SKILLS_E2E_TOKEN", "super-secret-value"))
	skillsWorkspace(t, s)

	t.Run("disabled", func(t *testing.T) {
		res := s.invoke(t, "read_file", map[string]any{"path": "skills/off/SKILL.md"})
		mustFail(t, res, toolerr.PolicyDenied)
		if res.Result != "Error: Skill 'off' is disabled. Enable it first." {
			t.Errorf("result %q", res.Result)
		}
	})
	t.Run("disabled through another spelling of the path", func(t *testing.T) {
		for _, p := range []string{"./skills/off/SKILL.md", "skills/x/../off/SKILL.md", filepath.Join(s.Workspace, "skills/off/SKILL.md")} {
			mustFail(t, s.invoke(t, "read_file", map[string]any{"path": p}), toolerr.PolicyDenied, "Skill 'off' is disabled")
		}
	})
	t.Run("disabled in a batch", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "read_file", map[string]any{"paths": []string{"skills/ready/SKILL.md", "skills/off/SKILL.md"}}))
		if !strings.Contains(out, "[File: skills/off/SKILL.md] Error: Skill 'off' is disabled. Enable it first.") || !strings.Contains(out, "# Ready") {
			t.Errorf("batch:\n%s", out)
		}
	})
	t.Run("other files of a disabled skill are plain files", func(t *testing.T) {
		s.writeWS(t, "skills/off/notes.md", "notes")
		mustSucceed(t, s.invoke(t, "read_file", map[string]any{"path": "skills/off/notes.md"}))
	})
	t.Run("requirements missing", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "read_file", map[string]any{"path": "skills/needs/SKILL.md"}))
		first, rest, _ := strings.Cut(out, "\n")
		want := "[Skill 'needs' is not available here: programs not found on PATH: no-such-program-e2e; environment variables not set: SKILLS_E2E_UNSET."
		if !strings.HasPrefix(first, want) {
			t.Errorf("first line %q, want it to start with %q", first, want)
		}
		if !strings.HasPrefix(rest, "[File: skills/needs/SKILL.md") || !strings.Contains(rest, "body line") {
			t.Errorf("the file is not returned after the notice:\n%s", out)
		}
		if strings.Contains(out, "super-secret-value") {
			t.Error("an environment value reached the result")
		}
	})
	t.Run("broken front matter", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "read_file", map[string]any{"path": "skills/broken/SKILL.md"}))
		if !strings.HasPrefix(out, "[Skill 'broken': its front matter could not be read") || !strings.Contains(out, "# Broken") {
			t.Errorf("result:\n%s", out)
		}
	})
	t.Run("available", func(t *testing.T) {
		out := mustSucceed(t, s.invoke(t, "read_file", map[string]any{"path": "skills/ready/SKILL.md"}))
		if !strings.HasPrefix(out, "[File: skills/ready/SKILL.md") {
			t.Errorf("result:\n%s", out)
		}
	})
	t.Run("missing skill", func(t *testing.T) {
		mustFail(t, s.invoke(t, "read_file", map[string]any{"path": "skills/nope/SKILL.md"}), toolerr.NotFound)
	})
}

// skillJSON mirrors GET /skills's items.
type skillJSON struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Always      bool   `json:"always"`
	Enabled     bool   `json:"enabled"`
	Available   bool   `json:"available"`
	Missing     struct {
		Bins []string `json:"bins"`
		Env  []string `json:"env"`
	} `json:"missing"`
	Error *string `json:"error"`
}

func TestSkillsList(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"SKILLS_DISABLED": "OFF"}, withEnv("SKILLS_E2E_TOKEN", "super-secret-value"), withKey("skills-e2e-key-0123456789"))
	skillsWorkspace(t, s)

	resp, body := s.do(t, "GET", "/skills", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /skills: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "super-secret-value") {
		t.Error("an environment value reached the listing")
	}
	var got struct{ Skills []skillJSON }
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	by := map[string]skillJSON{}
	for _, sk := range got.Skills {
		names = append(names, sk.Name)
		by[sk.Name] = sk
		if sk.Missing.Bins == nil || sk.Missing.Env == nil {
			t.Errorf("%s: missing.bins and missing.env must be lists, even empty: %s", sk.Name, body)
		}
	}
	if strings.Join(names, ",") != "broken,needs,off,plain,ready" {
		t.Errorf("names %v, want them sorted, without the folder that has no SKILL.md", names)
	}
	check := func(name string, ok bool, why string) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %s: %+v", name, why, by[name])
		}
	}
	r := by["ready"]
	check("ready", r.Title == "Ready" && r.Description == "Needs only sh" && r.Always && r.Enabled && r.Available && len(r.Missing.Bins)+len(r.Missing.Env) == 0 && r.Error == nil, "usable")
	n := by["needs"]
	check("needs", n.Enabled && !n.Available && strings.Join(n.Missing.Bins, ",") == "no-such-program-e2e" && strings.Join(n.Missing.Env, ",") == "SKILLS_E2E_UNSET", "unavailable")
	o := by["off"]
	check("off", !o.Enabled && !o.Available && o.Title == "Off", "disabled (case-insensitive name)")
	b := by["broken"]
	check("broken", b.Error != nil && strings.Contains(*b.Error, "front matter") && !b.Available && b.Title == "broken", "listed with an error")
	p := by["plain"]
	check("plain", p.Available && p.Title == "plain" && p.Description == "", "no front matter")

	// Edits show at once.
	os.RemoveAll(filepath.Join(s.Workspace, "skills", "broken"))
	_, body = s.do(t, "GET", "/skills", nil, nil)
	if strings.Contains(string(body), `"broken"`) {
		t.Errorf("removed skill still listed: %s", body)
	}

	// Behind the API key like every route but the health checks.
	s.Key = ""
	resp, _ = s.do(t, "GET", "/skills", nil, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /skills without a key: %d", resp.StatusCode)
	}
}

func TestSkillsListEmpty(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	resp, body := s.do(t, "GET", "/skills", nil, nil)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"skills":[]}` {
		t.Errorf("no skills folder: %d %s", resp.StatusCode, body)
	}
	// A skills folder linked out of the workspace is not followed.
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "evil"), 0o755)
	os.WriteFile(filepath.Join(outside, "evil", "SKILL.md"), []byte("---\ntitle: Evil\n---\n"), 0o644)
	if err := os.Symlink(outside, filepath.Join(s.Workspace, "skills")); err != nil {
		t.Fatal(err)
	}
	resp, body = s.do(t, "GET", "/skills", nil, nil)
	if strings.Contains(string(body), "Evil") {
		t.Errorf("skills outside the workspace listed: %d %s", resp.StatusCode, body)
	}
}
