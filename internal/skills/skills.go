// Package skills reads the skills in workspace/skills/<name>/SKILL.md, as
// CountBot's SkillsLoader does: a Markdown file whose YAML front matter
// gives a title, a description, whether the skill is always loaded, and
// what it requires (programs on PATH, environment variables), as
//
//	metadata: {"CountBot": {"requires": {"bins": ["jq"], "env": ["API_KEY"]}}}
//
// where metadata may be a YAML map or, as CountBot writes it, a JSON string.
// It reports which skills are enabled and available, and gates read_file:
// a disabled skill is refused, one whose requirements are missing is read
// with a first line that says so.
package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Dir is the skills folder, relative to the workspace.
const Dir = "skills"

// Bounds: a workspace may hold many folders, and a SKILL.md may be large;
// only its front matter is read.
const (
	maxSkills      = 500
	maxFrontMatter = 64 << 10
	maxRequired    = 50
)

// Skill describes one skill, as GET /skills lists it.
type Skill struct {
	Name        string  `json:"name"`
	Title       string  `json:"title"`
	Description string  `json:"description"`
	Always      bool    `json:"always"`
	Enabled     bool    `json:"enabled"`   // not named in TOOLSVC_SKILLS_DISABLED
	Available   bool    `json:"available"` // enabled, readable, and nothing required is missing
	Missing     Missing `json:"missing"`
	// Error says why the skill's front matter could not be read; the skill
	// is then listed but not available.
	Error string `json:"error,omitempty"`
}

// Missing is what a skill requires that this service lacks.
type Missing struct {
	Bins []string `json:"bins"`
	Env  []string `json:"env"`
}

func (m Missing) empty() bool { return len(m.Bins) == 0 && len(m.Env) == 0 }

// Loader reads the skills of one workspace. It reads the files on every
// call, so edits show at once; a skills folder is small.
type Loader struct {
	root     *os.Root
	disabled []string
	// lookPath and lookupEnv check requirements; tests replace them.
	lookPath  func(string) (string, error)
	lookupEnv func(string) (string, bool)
}

// New returns the loader of the workspace root. disabled names skills that
// are refused (compared case-insensitively, so a deny list errs on the
// side of refusing).
func New(root *os.Root, disabled []string) *Loader {
	return &Loader{root: root, disabled: disabled, lookPath: exec.LookPath, lookupEnv: os.LookupEnv}
}

// In returns the loader of another folder's skills (a key's own folder),
// with the same disabled list.
func (l *Loader) In(root *os.Root) *Loader {
	c := *l
	c.root = root
	return &c
}

// List returns every skill, sorted by name. A missing skills folder means
// no skills; a folder without SKILL.md is not a skill.
func (l *Loader) List() ([]Skill, error) {
	dir, err := l.root.Open(Dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || escapes(err) {
		// No skills; a skills folder linked out of the workspace is not
		// followed.
		return []Skill{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	entries, err := dir.ReadDir(maxSkills * 4)
	if err != nil && !errors.Is(err, io.EOF) {
		if errors.Is(err, syscall.ENOTDIR) {
			return []Skill{}, nil
		}
		return nil, err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	out := []Skill{}
	for _, e := range entries {
		if len(out) == maxSkills || !l.isDir(e) {
			continue
		}
		s, ok := l.Load(e.Name())
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// isDir reports whether e is a folder, or a link to a folder that stays in
// the workspace.
func (l *Loader) isDir(e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink == 0 {
		return e.IsDir()
	}
	fi, err := l.root.Stat(path.Join(Dir, e.Name()))
	return err == nil && fi.IsDir()
}

// Load describes the skill name; ok is false when skills/<name>/SKILL.md
// does not exist (or name is not a plain folder name).
func (l *Loader) Load(name string) (s Skill, ok bool) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return Skill{}, false
	}
	s = Skill{Name: name, Title: name, Enabled: !l.Disabled(name), Missing: Missing{Bins: []string{}, Env: []string{}}}
	head, err := l.readHead(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Skill{}, false
	}
	if err != nil {
		s.Error = "cannot read SKILL.md: " + plainError(err)
		return s, true
	}
	fm, err := parseFrontMatter(head)
	if err != nil {
		s.Error = err.Error()
		return s, true
	}
	if fm.Title != "" {
		s.Title = fm.Title
	} else if fm.Name != "" {
		s.Title = fm.Name
	}
	s.Description = fm.Description
	s.Always = bool(fm.Always)
	for _, b := range fm.requires.Bins {
		if !validBin(b) {
			s.Missing.Bins = append(s.Missing.Bins, b)
			continue
		}
		if _, err := l.lookPath(b); err != nil {
			s.Missing.Bins = append(s.Missing.Bins, b)
		}
	}
	for _, e := range fm.requires.Env {
		// Only presence is checked; the value never leaves the service.
		if _, set := l.lookupEnv(e); !validEnv(e) || !set {
			s.Missing.Env = append(s.Missing.Env, e)
		}
	}
	s.Available = s.Enabled && s.Missing.empty()
	return s, true
}

// Disabled reports whether name is in the disabled list.
func (l *Loader) Disabled(name string) bool {
	for _, d := range l.disabled {
		if strings.EqualFold(d, name) {
			return true
		}
	}
	return false
}

// CheckSkill implements read_file's skill gate over the skills of root
// (nil: the loader's own): a disabled skill is an error the model sees as
// is; a skill whose requirements are missing, or whose front matter is
// broken, gets a notice put before its text.
func (l *Loader) CheckSkill(root *os.Root, name string) (notice string, err error) {
	if root != nil && root != l.root {
		l = l.In(root)
	}
	if l.Disabled(name) {
		return "", toolerr.Errorf(toolerr.PolicyDenied, "Skill '%s' is disabled. Enable it first.", runes.Shorten(name, runes.Echo))
	}
	s, ok := l.Load(name)
	switch {
	case !ok:
		return "", nil // read_file reports the missing file
	case s.Error != "":
		return fmt.Sprintf("[Skill '%s': its front matter could not be read (%s), so its requirements are unknown.]", name, s.Error), nil
	case !s.Missing.empty():
		var parts []string
		if len(s.Missing.Bins) > 0 {
			parts = append(parts, "programs not found on PATH: "+strings.Join(s.Missing.Bins, ", "))
		}
		if len(s.Missing.Env) > 0 {
			parts = append(parts, "environment variables not set: "+strings.Join(s.Missing.Env, ", "))
		}
		return fmt.Sprintf("[Skill '%s' is not available here: %s. Commands that need them will fail; tell the user what to install or set.]",
			name, strings.Join(parts, "; ")), nil
	}
	return "", nil
}

// readHead reads the start of skills/<name>/SKILL.md, enough for its front
// matter. The file is opened through the workspace root, without blocking
// on a FIFO, and must be a regular file.
func (l *Loader) readHead(name string) ([]byte, error) {
	f, err := l.root.OpenFile(path.Join(Dir, name, "SKILL.md"), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("SKILL.md is not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, maxFrontMatter))
}

func plainError(err error) string {
	if escapes(err) {
		return "it leads outside the workspace"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// escapes reports whether err is os.Root refusing a path that leads out of
// the workspace (the os package has no exported error for it).
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// frontMatter is the YAML header of a SKILL.md.
type frontMatter struct {
	Name        string    `yaml:"name"`
	Title       string    `yaml:"title"`
	Description string    `yaml:"description"`
	Always      looseBool `yaml:"always"`
	Metadata    yaml.Node `yaml:"metadata"`

	requires requires
}

type requires struct {
	Bins stringList `json:"bins"`
	Env  stringList `json:"env"`
}

// parseFrontMatter reads the YAML between a first line "---" and the next
// line "---" (or "..."). A file without front matter is a skill without
// metadata.
func parseFrontMatter(b []byte) (frontMatter, error) {
	var fm frontMatter
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	first, rest, _ := bytes.Cut(b, []byte("\n"))
	if string(bytes.TrimRight(first, " \t\r")) != "---" {
		return fm, nil
	}
	var yml []byte
	closed := false
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if t := string(bytes.TrimRight(line, " \t\r")); t == "---" || t == "..." {
			closed = true
			break
		}
		yml = append(yml, line...)
		yml = append(yml, '\n')
	}
	if !closed {
		return fm, fmt.Errorf("front matter: no closing '---' line within the first %d KiB", maxFrontMatter>>10)
	}
	if err := yaml.Unmarshal(yml, &fm); err != nil {
		return fm, fmt.Errorf("front matter: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	req, err := requiresOf(&fm.Metadata)
	if err != nil {
		return fm, fmt.Errorf("front matter: metadata: %w", err)
	}
	if len(req.Bins) > maxRequired || len(req.Env) > maxRequired {
		return fm, fmt.Errorf("front matter: metadata: more than %d requirements", maxRequired)
	}
	fm.requires = req
	return fm, nil
}

// requiresOf finds metadata.CountBot.requires, with metadata given either
// as YAML or as a JSON string, and the "CountBot" key in any case.
func requiresOf(n *yaml.Node) (requires, error) {
	var req requires
	var meta any
	switch {
	case n.Kind == 0:
		return req, nil
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return req, nil
	case n.Kind == yaml.ScalarNode:
		if strings.TrimSpace(n.Value) == "" {
			return req, nil
		}
		if err := json.Unmarshal([]byte(n.Value), &meta); err != nil {
			return req, fmt.Errorf("not a JSON object: %w", err)
		}
	default:
		if err := n.Decode(&meta); err != nil {
			return req, err
		}
	}
	m, ok := meta.(map[string]any)
	if !ok {
		return req, errors.New("not a map")
	}
	for k, v := range m {
		if !strings.EqualFold(k, "countbot") {
			continue
		}
		cb, ok := v.(map[string]any)
		if !ok {
			return req, fmt.Errorf("%s is not a map", k)
		}
		r, ok := cb["requires"]
		if !ok || r == nil {
			return req, nil
		}
		// Through JSON, so YAML and JSON metadata decode alike.
		b, err := json.Marshal(r)
		if err != nil {
			return req, err
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return req, fmt.Errorf("%s.requires: %w", k, err)
		}
	}
	return req, nil
}

// stringList accepts a list of strings or a single string.
type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = stringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("expected a list of names")
	}
	*s = many
	return nil
}

// looseBool accepts true/false and the strings "true"/"false" (and YAML's
// yes/no), since front matter is written by hand.
type looseBool bool

func (b *looseBool) UnmarshalYAML(n *yaml.Node) error {
	var v bool
	if err := n.Decode(&v); err == nil {
		*b = looseBool(v)
		return nil
	}
	switch strings.ToLower(strings.TrimSpace(n.Value)) {
	case "true", "yes", "on", "1":
		*b = true
	case "false", "no", "off", "0", "":
		*b = false
	default:
		return fmt.Errorf("line %d: always: %q is not true or false", n.Line, n.Value)
	}
	return nil
}

// validBin accepts program names only: a path would let a skill file probe
// for files anywhere on the host. Names are 1 to 128 of [A-Za-z0-9._+-],
// "." and ".." excepted. (Checked by hand: a regular expression with a
// counted repetition is compiled at start-up into a program as long as the
// count, about 2 ms of every start.)
func validBin(s string) bool {
	if len(s) == 0 || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !asciiAlnum(c) && !strings.ContainsRune("._+-", rune(c)) {
			return false
		}
	}
	return true
}

// validEnv accepts environment variable names: a letter or underscore,
// then letters, digits and underscores, 128 characters at most.
func validEnv(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !asciiAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

func asciiAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
