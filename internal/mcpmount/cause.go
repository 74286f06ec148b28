package mcpmount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// A stdio server that does not start says why in its own words, if at
// all: npm prints "npm ERR! code EAI_AGAIN", a shell "uvx: not found", node
// "Cannot find module '/root/...'". Pasted from a README, an entry usually
// fails for one of three reasons the sandbox brings: the network is off
// (npx and uvx download the package at every start), the program lives
// where a version manager put it, under HOME, which the sandbox hides, or
// the entry names a file in a folder the sandbox hides. likelyCause names
// the one that fits, so that the error says what to change rather than
// only that the server did not answer.

// networkMarks are what a failed DNS look-up or connection looks like in
// the stderr of npm, pip, uv, node and curl, the refusal of the
// service's own proxy (an allowlist, or the guard behind it) included.
var networkMarks = regexp.MustCompile(`refused: \S+:\d+ \(|EAI_AGAIN|ENOTFOUND|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|getaddrinfo|Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|Could not resolve host|[Nn]etwork is unreachable|No route to host|dns error|failed to lookup address`)

// missingProgram finds the program a shell, env, bubblewrap or node could
// not find, in the forms they print.
var missingProgram = []*regexp.Regexp{
	regexp.MustCompile(`(?m)\benv: ['‘"]?([^'’"\s:]+)['’"]?: No such file or directory`),
	regexp.MustCompile(`(?m)\bsh: (?:line )?(?:\d+: )?(?:exec: )?([^:\s]+): (?:command )?not found`),
	regexp.MustCompile(`(?m)execvp:? ([^:\s]+): No such file or directory`),
	regexp.MustCompile(`(?m)\bspawn (\S+) ENOENT`),
	regexp.MustCompile(`(?m)exec: "([^"]+)": executable file not found`),
}

// missingFile is what a program says of a file it cannot reach.
var missingFile = regexp.MustCompile(`No such file or directory|ENOENT|Permission denied|EACCES|Cannot find module|can't open file|cannot open|does not exist|not found`)

// absPath finds the absolute paths a message names.
var absPath = regexp.MustCompile(`(?:^|[\s'"‘(=\[])(/[^\s'"’:,;()\[\]]+)`)

// launchers download the package they run when they start, unless it is
// in their cache: with the network off, they wait for it or fail.
var launchers = map[string]string{
	"npx": "npm", "pnpx": "npm", "bunx": "npm", "uvx": "python", "pipx": "python",
}

// failure is what is known of a stdio server's failed start.
type failure struct {
	stderr   string // the end of its stderr, redacted
	exit     error  // how its process ended; nil while it ran or when the service killed it
	timedOut bool   // no answer within the connect timeout
}

// likelyCause returns the most likely reason f's server did not start,
// as a sentence with what to do ("Next: ..."), or "".
func (s *Server) likelyCause(f failure) string {
	if s.cfg.Type != TypeStdio {
		return ""
	}
	if line := matchingLine(f.stderr, networkMarks); line != "" {
		return s.networkCause(fmt.Sprintf("its stderr says %q", line))
	}
	if why := s.missingProgramCause(f); why != "" {
		return why
	}
	if why := s.hiddenPathCause(f); why != "" {
		return why
	}
	if f.timedOut {
		if kind, pkg := s.launcher(); kind != "" {
			if !s.network().Set() {
				return s.networkCause(fmt.Sprintf("%s downloads %s when it starts", filepath.Base(s.cfg.Command), orPackage(pkg)))
			}
			return fmt.Sprintf("%s downloads %s when it starts, which can take longer than the %s a server has to answer, or cannot reach the registry. Next: install the package once (%s) and name its program, so that nothing is downloaded at start",
				filepath.Base(s.cfg.Command), orPackage(pkg), s.d.ConnectTimeout, installHint(kind, pkg))
		}
	}
	return ""
}

// networkCause says the server needs a network it cannot reach; evidence
// is what shows it.
func (s *Server) networkCause(evidence string) string {
	kind, pkg := s.launcher()
	offline := "install what it runs where the sandbox can run it and name that program"
	if kind != "" {
		offline = fmt.Sprintf("install the package once (%s) and name its program", installHint(kind, pkg))
	}
	switch n := s.network(); {
	case !n.Set():
		return fmt.Sprintf("the server needs the network, which is off for it (%s). Next: %s, or give the entry \"network\" with the hosts it needs, such as [\"registry.npmjs.org\"] (true opens every address)", evidence, offline)
	case !n.On:
		return fmt.Sprintf("the server could not reach what it needs: its network is %s (%s). Next: add the hosts it needs to the entry's \"network\" (the service's log names each refusal), or %s", n, evidence, offline)
	}
	return fmt.Sprintf("the server could not reach the network although the entry has \"network\": true (%s): the host's DNS, a proxy or a firewall is in the way. Next: mend the host's network, or %s", evidence, offline)
}

// launcher returns the kind of package launcher the entry runs ("npm",
// "python") and the package it names, or "".
func (s *Server) launcher() (kind, pkg string) {
	base := filepath.Base(s.cfg.Command)
	args := s.res.args
	switch {
	case launchers[base] != "":
		kind = launchers[base]
		if base == "pipx" && len(args) > 0 && args[0] == "run" {
			args = args[1:]
		}
	case (base == "npm" || base == "pnpm" || base == "yarn") && len(args) > 0 && (args[0] == "exec" || args[0] == "dlx" || args[0] == "x"):
		kind, args = "npm", args[1:]
	case base == "uv" && len(args) > 1 && args[0] == "tool" && args[1] == "run":
		kind, args = "python", args[2:]
	default:
		return "", ""
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return kind, a
		}
	}
	return kind, ""
}

func orPackage(pkg string) string {
	if pkg == "" {
		return "the package"
	}
	return pkg
}

func installHint(kind, pkg string) string {
	p := pkg
	if p == "" {
		p = "<package>"
	}
	if kind == "python" {
		return "pip install " + p + " into a virtual environment under /opt"
	}
	return "npm install -g " + p + ", under /usr/local"
}

// missingProgramCause explains a program that could not be run in the
// sandbox: the server's command, or one it runs (its #! interpreter, say).
func (s *Server) missingProgramCause(f failure) string {
	prog := ""
	for _, re := range missingProgram {
		if m := re.FindStringSubmatch(f.stderr); m != nil {
			prog = m[1]
			break
		}
	}
	if prog == "" {
		if exitCode(f.exit) != 127 {
			return ""
		}
		prog = s.cfg.Command
	}
	where, hidden := s.onHost(prog)
	switch {
	case where != "" && hidden != "":
		return fmt.Sprintf("the program %s is not in the sandbox: the service finds it at %s, under %s, which the sandbox hides from servers (version managers such as nvm and pyenv install there). Next: install it system-wide (under /usr/local, or /opt) and name that path, e.g. \"command\": \"/usr/local/bin/%s\"",
			prog, where, hidden, filepath.Base(prog))
	case where != "":
		return fmt.Sprintf("the program %s is not in the sandbox, though the service finds it at %s: servers see the system folders, the workspace and their HOME only. Next: install it under /usr/local or /opt and name that path", prog, where)
	}
	return fmt.Sprintf("the program %s is not installed where the server runs (nor on the service's PATH). Next: install it system-wide, or name an absolute path under /usr or /opt", prog)
}

// hiddenPathCause explains a file the server or its entry names in a
// folder the sandbox hides.
func (s *Server) hiddenPathCause(f failure) string {
	if f.stderr != "" && missingFile.MatchString(f.stderr) {
		for _, m := range absPath.FindAllStringSubmatch(f.stderr, -1) {
			if under := s.hiddenUnder(m[1]); under != "" {
				return hiddenPathText(m[1], under)
			}
		}
	}
	if f.exit == nil || f.timedOut {
		return ""
	}
	// It ended on its own: an argument in a hidden folder is the likely
	// reason even when it did not say so.
	for _, a := range append([]string{s.cfg.Command}, s.res.args...) {
		for _, m := range absPath.FindAllStringSubmatch(a, -1) {
			if under := s.hiddenUnder(m[1]); under != "" {
				return hiddenPathText(m[1], under)
			}
		}
	}
	return ""
}

func hiddenPathText(path, under string) string {
	return fmt.Sprintf("%s lies under %s, which the sandbox hides from servers: they see the system folders, the workspace, their HOME and a /tmp of their own, empty at each start. Next: put it in the workspace (name it with ${WORKSPACE}) or under /opt or /usr/local", path, under)
}

// onHost finds prog as the service would: as a path, on the service's
// PATH, or in the folders version managers install into under HOME. It
// returns where, and the hidden folder that holds it ("" when none does).
func (s *Server) onHost(prog string) (where, hidden string) {
	environ := s.d.Environ()
	home := envValue(environ, "HOME")
	var candidates []string
	if strings.Contains(prog, "/") {
		candidates = []string{prog}
	} else {
		for _, d := range filepath.SplitList(envValue(environ, "PATH")) {
			if filepath.IsAbs(d) {
				candidates = append(candidates, filepath.Join(d, prog))
			}
		}
		if home != "" {
			for _, pattern := range []string{".nvm/versions/node/*/bin", ".pyenv/shims", ".local/bin", ".cargo/bin", ".bun/bin", ".deno/bin", ".volta/bin", "go/bin", ".npm-global/bin", ".asdf/shims"} {
				dirs, _ := filepath.Glob(filepath.Join(home, pattern))
				for _, d := range dirs {
					candidates = append(candidates, filepath.Join(d, prog))
				}
			}
		}
	}
	for _, p := range candidates {
		if executable(p) != nil {
			continue
		}
		if h := s.hiddenUnder(p); h != "" {
			return p, h
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if h := s.hiddenUnder(real); h != "" {
				return p + " (" + real + ")", h
			}
		}
		return p, ""
	}
	return "", ""
}

// hiddenUnder returns the folder the sandbox hides that holds path, as
// the message names it ("HOME (/root)", "/tmp"), or "" when the server
// can see it: in the workspace, its HOME, or a folder no sandbox hides.
func (s *Server) hiddenUnder(path string) string {
	path = filepath.Clean(path)
	for _, seen := range s.visible() {
		if within(path, seen) {
			return ""
		}
	}
	home := envValue(s.d.Environ(), "HOME")
	if home != "" && home != "/" && within(path, home) {
		return "the service's HOME (" + home + ")"
	}
	for _, d := range []string{"/root", "/home", "/tmp", "/var/tmp", "/run", os.TempDir()} {
		if within(path, d) {
			return d
		}
	}
	return ""
}

// visible are the folders a server sees although they may lie in a
// hidden one: the workspace and the HOME it is given.
func (s *Server) visible() []string {
	var out []string
	if s.d.Workspace != nil {
		out = append(out, s.d.Workspace.Dir())
	}
	if s.d.Home != "" {
		out = append(out, s.d.Home)
	}
	return out
}

func within(path, dir string) bool {
	dir = filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// matchingLine returns the first line of text re matches, trimmed, or
// "": a long line is cut to the part around the match.
func matchingLine(text string, re *regexp.Regexp) string {
	const before, after = 60, 100
	for line := range strings.SplitSeq(text, "\n") {
		loc := re.FindStringIndex(line)
		if loc == nil {
			continue
		}
		if from := loc[0] - before; from > 0 {
			line = "..." + line[from:]
			loc[1] += 3 - from
		}
		if loc[1]+after < len(line) {
			line = line[:loc[1]+after] + "..."
		}
		return strings.ToValidUTF8(strings.TrimSpace(line), "\uFFFD")
	}
	return ""
}

// exitCode is the exit status err reports, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		var code int
		if _, scanErr := fmt.Sscanf(err.Error(), "exit status %d", &code); scanErr == nil {
			return code
		}
	}
	return -1
}
