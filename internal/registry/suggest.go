package registry

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/countbot/toolsvc/internal/runes"
)

// maxSuggestions is how many close names an unknown tool's answer names.
const maxSuggestions = 3

// maxNameLen is the longest name compared with the tools' names: twice
// the longest a tool may have.
const maxNameLen = 2 * 64

// UnknownToolMessageFor is UnknownToolMessage for a call of the key named
// key, naming the tools closest to name among those the key may call.
// A tool the key may not call is never named, and the answer for one of
// them is what the same name would get if no such tool existed, so that a
// denied tool still answers exactly as an unknown one.
func (r *Registry) UnknownToolMessageFor(key, name string) string {
	near := r.ClosestNamesFor(key, name)
	if len(near) == 0 {
		return UnknownToolMessage(name)
	}
	return fmt.Sprintf("Tool '%s' not found. Did you mean %s? Please use only the tools provided in the tool definitions.",
		runes.Shorten(name, runes.Echo), strings.Join(near, " or "))
}

// ClosestNamesFor returns the names of the tools the key named key may
// call that a caller naming name may have meant, closest first (at most
// three; none when none is close). A door whose protocol has its own
// unknown-tool answer (MCP's JSON-RPC error) adds them to it.
func (r *Registry) ClosestNamesFor(key, name string) []string {
	return closestNames(name, r.namesFor(key))
}

// namesFor lists the registered tools the key named key may call.
func (r *Registry) namesFor(key string) []string {
	names := r.Names()
	if r.SeesAll(key) {
		return names
	}
	return slices.DeleteFunc(names, func(n string) bool { return !r.opts.Policy.Allows(key, n) })
}

// closestNames returns up to maxSuggestions names of known that a model
// may have meant by name, closest first: a few typing mistakes away (at
// most a third of the name's characters, and two always), the same words
// in another order (file_read for read_file), one starting with the other
// (execute for exec, read for read_file), or an MCP server's tool
// named without its server's prefix (read_text_file for
// filesystem__read_text_file). A name that far from all gets none: a
// suggestion that far off would only mislead.
func closestNames(name string, known []string) []string {
	type match struct {
		name string
		dist int
	}
	// No tool's name is longer than 64 characters: a far longer one is
	// no near miss, and comparing it would only cost time.
	if len(name) > maxNameLen {
		return nil
	}
	lower := strings.ToLower(name)
	var found []match
	for _, k := range known {
		if k == name {
			continue
		}
		kl := strings.ToLower(k)
		d := runes.Distance(lower, kl)
		switch {
		case d <= max(2, len([]rune(k))/3):
		case sameWords(lower, kl), strings.HasSuffix(kl, "__"+lower), sharedStart(lower, kl):
			d = 1
		default:
			continue
		}
		found = append(found, match{k, d})
	}
	sort.SliceStable(found, func(i, j int) bool {
		if found[i].dist != found[j].dist {
			return found[i].dist < found[j].dist
		}
		return found[i].name < found[j].name
	})
	out := make([]string, 0, min(len(found), maxSuggestions))
	for _, m := range found[:min(len(found), maxSuggestions)] {
		out = append(out, m.name)
	}
	return out
}

// sharedStart reports whether one of a and b starts with the other, the
// shorter having four characters at least: fewer match too much.
func sharedStart(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 4 && strings.HasPrefix(b, a)
}

// sameWords reports whether a and b are the same words, separated by _
// or -, in another order.
func sameWords(a, b string) bool {
	split := func(s string) []string {
		w := strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '-' })
		slices.Sort(w)
		return w
	}
	wa := split(a)
	return len(wa) > 1 && slices.Equal(wa, split(b))
}
