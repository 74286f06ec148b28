package shellguard

import (
	"slices"
	"strings"
)

// optSpec describes the command-line options of a program that starts
// another one (a wrapper), enough to find where the started command begins.
type optSpec struct {
	argShort    string   // short options taking a value, attached or in the next word
	attached    string   // short options taking an optional value attached only (-i[R])
	argLong     []string // long options taking a value (the next word when there is no '=')
	scriptShort string   // short options whose value is a shell script
	scriptLong  []string // long options whose value is a shell script
	noCmdShort  string   // short options after which no command follows
	noCmdLong   []string
	assigns     bool // NAME=VALUE words are skipped (env, sudo)
	numeric     bool // -N is an option (nice -10)
	operands    int  // operands before the command (timeout's duration, chroot's root)
}

// optResult is what parseOpts found.
type optResult struct {
	cmd       int               // index of the started command; len(ws) when none
	script    *word             // value of a script option
	noCmd     bool              // an option that means no command follows
	assigned  []string          // names set by NAME=VALUE words
	seen      map[string]string // options seen ("-x", "--name") and their values
	assignArg []word            // the NAME=VALUE words
}

// parseOpts walks the options of ws[0] as described by spec. A word whose
// value is computed ends the options: it is then taken as the command
// name, which the caller refuses as computed. Failing that way is safe.
func parseOpts(ws []word, spec optSpec) optResult {
	r := optResult{seen: map[string]string{}}
	i := 1
	for i < len(ws) {
		w := ws[i]
		if !w.lit {
			break
		}
		s := w.text
		if s == "--" {
			i++
			break
		}
		if spec.assigns && isAssignment(s) {
			name, _, _ := strings.Cut(s, "=")
			r.assigned = append(r.assigned, name)
			r.assignArg = append(r.assignArg, w)
			i++
			continue
		}
		if strings.HasPrefix(s, "--") {
			i = r.longOpt(ws, i, spec) + 1
			continue
		}
		if len(s) > 1 && s[0] == '-' {
			if !(spec.numeric && isDigits(s[1:])) {
				i = r.shortOpts(ws, i, spec)
			}
			i++
			continue
		}
		break
	}
	for k := 0; k < spec.operands && i < len(ws); k++ {
		i++
	}
	r.cmd = i
	return r
}

// longOpt records the long option ws[i] (--name or --name=value), taking
// its value from the next word when spec says it has one and none is
// attached. It returns the index of the last word the option used.
func (r *optResult) longOpt(ws []word, i int, spec optSpec) int {
	name, val, eq := strings.Cut(ws[i].text[2:], "=")
	isScript := slices.Contains(spec.scriptLong, name)
	vw := litWord(val)
	if (isScript || slices.Contains(spec.argLong, name)) && !eq && i+1 < len(ws) {
		i++
		vw = ws[i]
	}
	r.seen["--"+name] = vw.text
	if isScript {
		r.script = &vw
	}
	if slices.Contains(spec.noCmdLong, name) {
		r.noCmd = true
	}
	return i
}

// shortOpts records the cluster of short options ws[i] (-abc), up to the
// first that takes a value: the rest of the word, or else the next word.
// It returns the index of the last word the options used.
func (r *optResult) shortOpts(ws []word, i int, spec optSpec) int {
	s := ws[i].text
	for j := 1; j < len(s); j++ {
		ch := s[j]
		key := "-" + string(ch)
		if strings.IndexByte(spec.noCmdShort, ch) >= 0 {
			r.noCmd = true
		}
		if strings.IndexByte(spec.attached, ch) >= 0 {
			r.seen[key] = s[j+1:]
			return i
		}
		if strings.IndexByte(spec.argShort, ch) >= 0 || strings.IndexByte(spec.scriptShort, ch) >= 0 {
			var vw word
			if j+1 < len(s) {
				vw = litWord(s[j+1:])
			} else if i+1 < len(ws) {
				i++
				vw = ws[i]
			}
			r.seen[key] = vw.text
			if strings.IndexByte(spec.scriptShort, ch) >= 0 {
				r.script = &vw
			}
			return i
		}
		r.seen[key] = ""
	}
	return i
}

// isAssignment reports whether s has the form NAME=VALUE.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// prefixOf reports whether s is a non-empty prefix of long, the way
// getopt_long accepts abbreviations (--rec for --recursive).
func prefixOf(s, long string) bool { return s != "" && strings.HasPrefix(long, s) }

// markToken marks the words containing tok, which a launcher replaces with
// input at run time (xargs -I{}, find -exec {}), as computed.
// leadingSafe says whether the replacement can never start with '-'.
func markToken(ws []word, tok string, leadingSafe bool) []word {
	out := make([]word, len(ws))
	for i, w := range ws {
		k := strings.Index(w.text, tok)
		if k < 0 || tok == "" {
			out[i] = w
			continue
		}
		prefix := w.text[:k]
		if !w.lit && len(w.prefix) < len(prefix) {
			prefix = w.prefix
		}
		safe := leadingSafe
		if prefix != "" {
			safe = prefix[0] != '-'
		}
		out[i] = word{text: w.text, prefix: prefix, dashSafe: safe}
	}
	return out
}
