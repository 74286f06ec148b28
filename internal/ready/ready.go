// Package ready checks that the folders the service works in can be used:
// that they exist, that a file can really be made in them (a probe file is
// created and removed: permission bits and read-only mounts both show), and
// that their file system has free space above a minimum. GET /readyz
// reports each check, so an operator sees which one failed; why it failed
// is for the operator only (see Bare).
package ready

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/countbot/toolsvc/internal/pathx"
)

// OK is the value of a check that passed.
const OK = "ok"

// Down stands for every value but OK, Starting and Off where the reason
// is withheld (see Bare).
const Down = "down"

// Starting begins the value of a check of something still coming up (an
// MCP server's first start); Off, followed by ": " and the reason, the
// value of a tool left out. Neither makes the service unready.
const (
	Starting = "starting"
	Off      = "off"
)

// ErrUnsupported is returned by a check this platform cannot make (free
// space without statfs). It is reported, but does not make the service
// unready.
var ErrUnsupported = errors.New("unavailable on this platform")

// Check is one named check.
type Check struct {
	Name string
	Run  func() error
}

// Report is the outcome of a set of checks.
type Report struct {
	Ready  bool
	Checks map[string]string // name -> "ok" or what is wrong
}

// Failed returns the names of the checks that failed, sorted.
func (r Report) Failed() []string {
	var out []string
	for name, v := range r.Checks {
		if v != OK && !isUnsupported(v) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func isUnsupported(v string) bool { return v == "unavailable: "+ErrUnsupported.Error() }

// Bare returns checks with every value that is not OK replaced by Down,
// but for the states that name no reason: Starting (an MCP server still
// coming up, "starting (since 3 s)") and Off (a tool left out, "off: ...").
// That is the outcome of each check without its reason, for a caller who
// may not read the reasons; a probe can tell a server that is still
// starting from one that failed. A reason can quote what only the operator should see:
// an MCP server's stderr (and whatever of its environment the server
// printed there), a URL inside the network, the tools file's mistakes.
// Whether a Down makes the service unready is not said here: that is the
// report's Ready (the answer's status), which Bare leaves as it was.
func Bare(checks map[string]string) map[string]string {
	out := make(map[string]string, len(checks))
	for name, v := range checks {
		switch {
		case v == OK:
		case strings.HasPrefix(v, Starting):
			v = Starting
		case strings.HasPrefix(v, Off+":"):
			v = Off
		default:
			v = Down
		}
		out[name] = v
	}
	return out
}

// Run runs every check, in order, and reports them all.
func Run(checks ...Check) Report {
	r := Report{Ready: true, Checks: make(map[string]string, len(checks))}
	for _, c := range checks {
		err := c.Run()
		switch {
		case err == nil:
			r.Checks[c.Name] = OK
		case errors.Is(err, ErrUnsupported):
			r.Checks[c.Name] = "unavailable: " + ErrUnsupported.Error()
		default:
			r.Checks[c.Name] = err.Error()
			r.Ready = false
		}
	}
	return r
}

// Writable checks that dir is a folder in which a file can be created and
// removed. The probe file's name starts with ".ready-".
func Writable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("missing: %w", pathx.StripPath(err))
	}
	if !fi.IsDir() {
		return errors.New("not a folder")
	}
	f, err := os.CreateTemp(dir, ".ready-*")
	if err != nil {
		return fmt.Errorf("not writable: %w", pathx.StripPath(err))
	}
	name := f.Name()
	werr := f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("not writable: cannot remove a file: %w", pathx.StripPath(err))
	}
	if werr != nil {
		return fmt.Errorf("not writable: %w", pathx.StripPath(werr))
	}
	return nil
}

// FreeSpace checks that each folder's file system has at least minFree bytes
// free for an unprivileged user. label names each folder in the message.
func FreeSpace(minFree int64, dirs map[string]string) error {
	labels := make([]string, 0, len(dirs))
	for l := range dirs {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	var low []string
	for _, l := range labels {
		free, err := freeBytes(dirs[l])
		if err != nil {
			return err
		}
		if free < uint64(minFree) {
			low = append(low, fmt.Sprintf("%s has %s free", l, human(free)))
		}
	}
	if len(low) > 0 {
		return fmt.Errorf("below the minimum of %s (TOOLSVC_MIN_FREE_BYTES): %s", human(uint64(minFree)), join(low))
	}
	return nil
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += "; "
		}
		out += v
	}
	return out
}

func human(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
