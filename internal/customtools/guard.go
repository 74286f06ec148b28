package customtools

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/countbot/toolsvc/internal/pathx"
)

// The tools file decides which programs the service runs and where it
// sends which credentials. Whoever can change it can make one tool call
// send the service's keys anywhere. So the file is refused, at start-up
// and at every reload, when the model can change it (it lies in the
// workspace or another folder sandboxed commands write to, or is reached
// through a link that does), when someone other than the service's user
// or root could change it or the folders above it (as ssh refuses its
// configuration files), and when it names one of the service's own
// settings as a variable.

// FileSetting names the setting that points at the tools file, for
// messages that tell the operator what to change.
const FileSetting = "TOOLSVC_TOOLS_FILE"

// ServicePrefix starts the names of the service's own settings, among them
// its keys and tokens. No ${NAME} in the tools file may read one.
const ServicePrefix = "TOOLSVC_"

// Area is a folder the model can write into: the workspace (write_file,
// edit_file, exec) or another folder exec's sandbox lets commands write.
type Area struct {
	Dir     string // as configured; resolved when checked
	What    string // names the folder in messages: "the workspace"
	Setting string // the setting that makes it so: "TOOLSVC_WORKSPACE"
}

// IsServiceVar reports whether name is one of the service's own settings.
// Case is ignored: Windows reads variables without it.
func IsServiceVar(name string) bool {
	return strings.HasPrefix(strings.ToUpper(name), ServicePrefix)
}

// HideServiceVars returns getenv that answers "not set" for the service's
// own settings, so that no ${NAME} anywhere can read one even where a
// check was missed.
func HideServiceVars(getenv func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if IsServiceVar(name) {
			return "", false
		}
		return getenv(name)
	}
}

// serviceRef returns the first ${NAME} in v that names one of the service's
// settings, or "".
func serviceRef(v string) string {
	for _, m := range varRef().FindAllStringSubmatch(v, -1) {
		if IsServiceVar(m[1]) {
			return m[1]
		}
	}
	return ""
}

// serviceRefError is the error for field, whose value v names one of the
// service's settings; nil when it names none.
func serviceRefError(field, v string) error {
	name := serviceRef(v)
	if name == "" {
		return nil
	}
	return fmt.Errorf("%s names ${%s}, one of the service's own settings (%s*, which hold its keys and tokens); the tools file may not read them. "+
		"Give it a variable of its own (export WEATHER_TOKEN=... beside the service's settings) and name that", field, name, ServicePrefix)
}

// serverServiceRefs refuses an mcpServers entry m whose env, headers, url
// or args name one of the service's settings as ${NAME}. The values are
// those of an entry as written, before the MCP package reads it.
func serverServiceRefs(m map[string]any) error {
	for _, field := range []string{"url", "env", "headers", "args"} {
		switch v := m[field].(type) {
		case string:
			if err := serviceRefError(field, v); err != nil {
				return err
			}
		case map[string]any:
			for _, k := range sortedKeys(v) {
				if s, ok := v[k].(string); ok {
					if err := serviceRefError(fmt.Sprintf("%s %s", field, k), s); err != nil {
						return err
					}
				}
			}
		case []any:
			for i, x := range v {
				if s, ok := x.(string); ok {
					if err := serviceRefError(fmt.Sprintf("%s[%d]", field, i), s); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckPlace refuses the tools file at path when it, or a link on the way
// to it, lies in one of areas: the model could change what the file says
// or where it leads.
func CheckPlace(path string, areas []Area) error {
	places, err := linkChain(path)
	if err != nil {
		return fmt.Errorf("tools file %s: %w", path, err)
	}
	return checkPlaces(path, places, areas)
}

func checkPlaces(path string, places []string, areas []Area) error {
	p, a, ok := inArea(places, areas)
	if !ok {
		return nil
	}
	how := "the file " + p + " lies"
	if p != places[len(places)-1] {
		how = "it is reached through the link " + p + ", which lies"
	}
	return refused("%s=%s: %s in %s, where the model can write (write_file, edit_file, exec), so it could add a tool that sends the service's keys anywhere. "+
		"Move the file out of every folder commands can write, e.g. to /etc/toolsvc/tools.yaml, owned by root or the service's user and writable by no one else, and point %s at it", FileSetting, path, how, a, FileSetting)
}

// inArea returns the first of places that lies in one of areas, and that
// area's name and folder.
func inArea(places []string, areas []Area) (place, area string, ok bool) {
	for _, a := range areas {
		if a.Dir == "" {
			continue
		}
		dir := resolveExisting(a.Dir)
		dirInfo, _ := os.Stat(dir)
		for _, p := range places {
			if pathx.Contains(dir, p) || sameFolderAbove(p, dirInfo) {
				return p, fmt.Sprintf("%s %s (%s)", a.What, dir, a.Setting), true
			}
		}
	}
	return "", "", false
}

// sameFolderAbove reports whether a folder above p is dir: the same folder
// under another name (a bind mount, other letter case on a disk that
// ignores it) is found by its identity.
func sameFolderAbove(p string, dir os.FileInfo) bool {
	if dir == nil {
		return false
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && os.SameFile(fi, dir) {
			return true
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// refusedError is a tools file refused for where it lies or who can change
// it; its message names the setting already.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refused(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// openChecked checks the tools file at path (where it lies, who can change
// it) and opens it. The checks of the file's owner and mode apply to what
// is opened, so a file swapped in between is caught.
func openChecked(path string, areas []Area) (*os.File, error) {
	places, err := linkChain(path)
	if err != nil {
		return nil, err
	}
	if err := checkPlaces(path, places, areas); err != nil {
		return nil, err
	}
	if err := checkFolders(path, places); err != nil {
		return nil, err
	}
	final := places[len(places)-1]
	f, err := os.Open(final)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = refused("%s=%s: %s is not a regular file; point %s at a YAML or JSON file", FileSetting, path, final, FileSetting)
	}
	if err == nil {
		err = ownerError(path, final, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkFolders checks who can change each link on the way to the file and
// every folder above each of them and above the file: a folder someone
// else can write lets them put another file in its place.
func checkFolders(path string, places []string) error {
	seen := map[string]bool{}
	for i, p := range places {
		if i < len(places)-1 {
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			if err := ownerError(path, p, fi); err != nil {
				return err
			}
		}
		for d := filepath.Dir(p); !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			fi, err := os.Lstat(d)
			if err != nil {
				return err
			}
			if err := ownerError(path, d, fi); err != nil {
				return err
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return nil
}

// maxLinks bounds the links followed to the tools file, as the kernel
// bounds them (ELOOP).
const maxLinks = 40

// linkChain resolves path one name at a time, as the system does, and
// returns where each link on the way lies (each link's own place, its
// folder resolved), then the file it all leads to. filepath.EvalSymlinks
// gives only the last; a link in the middle matters as much, since
// whoever can change it decides where the path leads.
func linkChain(path string) ([]string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	vol := filepath.VolumeName(abs)
	done := vol + string(filepath.Separator)
	todo := splitPath(abs[len(vol):])
	var places []string
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == "." {
			continue
		}
		if c == ".." {
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = next
			continue
		}
		if len(places) >= maxLinks {
			return nil, fmt.Errorf("more than %d links on the way to the file", maxLinks)
		}
		places = append(places, next)
		target, err := os.Readlink(next)
		if err != nil {
			return nil, err
		}
		if filepath.IsAbs(target) || filepath.VolumeName(target) != "" {
			v := filepath.VolumeName(target)
			done, target = v+string(filepath.Separator), target[len(v):]
		}
		todo = append(splitPath(target), todo...)
	}
	// The system's own answer too, where it differs (Windows' junctions).
	if real, err := filepath.EvalSymlinks(abs); err != nil {
		return nil, err
	} else if real != done {
		places = append(places, done)
		done = real
	}
	return append(places, done), nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return os.IsPathSeparator(uint8(r)) && r < 0x80 })
}

// resolveExisting resolves the links of p's longest existing part and
// keeps the rest as written, so that a folder not made yet still compares.
func resolveExisting(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	parent := filepath.Dir(abs)
	if parent == abs {
		return abs
	}
	return filepath.Join(resolveExisting(parent), filepath.Base(abs))
}

// WritablePaths lists the files s's command runs that lie in one of
// areas: its program, or a file it names as an argument (the script of
// sh scripts/x.sh). The model can change them. Such a tool stays allowed
// (a script in the workspace is a documented use); the caller says so in
// the log. Relative paths are relative to workspace, the command's
// working folder. A shell runner's script is not parsed.
func WritablePaths(s Spec, workspace string, areas []Area) []string {
	var out []string
	for i, a := range s.Argv {
		p := a
		if !filepath.IsAbs(a) {
			if i == 0 && !strings.ContainsRune(a, '/') && !strings.ContainsRune(a, filepath.Separator) {
				continue // a program looked up on PATH
			}
			p = filepath.Join(workspace, a)
		}
		places, err := linkChain(p)
		switch {
		case err == nil:
			if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
				continue
			}
		case i == 0:
			// A program that is not there yet is the model's to write.
			places = []string{resolveExisting(p)}
		default:
			continue // an argument that names no file
		}
		if _, _, ok := inArea(places, areas); ok {
			out = append(out, p)
		}
	}
	return out
}
