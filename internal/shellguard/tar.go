package shellguard

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// tarCommandLong are GNU tar's long options whose value tar runs as a
// command (through /bin/sh -c): a compressor, a program fed each member,
// the volume-change script, the remote shell.
var tarCommandLong = []string{"to-command", "use-compress-program", "info-script", "new-volume-script", "rsh-command", "rmt-command"}

// tarArgShort are GNU tar's short options that take a value; -F and -I
// are the ones whose value is a command.
const tarArgShort = "bCfFgHIKLNTVX"

// tar judges the commands GNU tar runs: --checkpoint-action=exec=CMD,
// --to-command, --use-compress-program (-I), --info-script and
// --new-volume-script (-F), --rsh-command and --rmt-command, in the dashed
// and in the old bundled spelling (tar cfI out.tar 'cmd' dir).
func (c *checker) tar(ws []word, sc scope) *Blocked {
	text := joinWords(ws)
	i, b := c.tarBundled(ws, text, sc)
	for ; b == nil && i < len(ws); i++ {
		w := ws[i]
		switch s := w.text; {
		case !w.lit:
			b = c.tarComputed(w, text, sc)
		case s == "--":
			return nil
		case strings.HasPrefix(s, "--"):
			i, b = c.tarLong(ws, i, text, sc)
		case len(s) >= 2 && s[0] == '-':
			i, b = c.tarShort(ws, i, text, sc)
		}
	}
	return b
}

// tarBundled judges the old style, where the first word bundles letters
// and the values of those taking one follow in order (tar cfI out.tar
// 'cmd' dir). It returns the index of the first word after those values.
func (c *checker) tarBundled(ws []word, text string, sc scope) (int, *Blocked) {
	if len(ws) < 2 || !ws[1].lit || ws[1].text == "" || ws[1].text[0] == '-' {
		return 1, nil
	}
	next := 2
	for _, ch := range []byte(ws[1].text) {
		if strings.IndexByte(tarArgShort, ch) < 0 {
			continue
		}
		if next >= len(ws) {
			break
		}
		if ch == 'F' || ch == 'I' {
			if b := c.tarCommand(ws[next], text, sc); b != nil {
				return next, b
			}
		}
		next++
	}
	return next, nil
}

// tarLong judges the long option at ws[i] and returns the index of the
// last word it used.
func (c *checker) tarLong(ws []word, i int, text string, sc scope) (int, *Blocked) {
	name, val, eq := strings.Cut(ws[i].text[2:], "=")
	checkpoint := len(name) > len("checkpoint") && prefixOf(name, "checkpoint-action")
	if !checkpoint && !tarCommandOption(name) {
		return i, nil
	}
	v := litWord(val)
	if !eq {
		if i+1 >= len(ws) {
			return i, nil
		}
		i++
		v = ws[i]
	}
	if checkpoint {
		return i, c.tarCheckpoint(v, text, sc)
	}
	return i, c.tarCommand(v, text, sc)
}

// tarShort judges the cluster of short options at ws[i] and returns the
// index of the last word it used.
func (c *checker) tarShort(ws []word, i int, text string, sc scope) (int, *Blocked) {
	s := ws[i].text
	for j := 1; j < len(s); j++ {
		ch := s[j]
		if strings.IndexByte(tarArgShort, ch) < 0 {
			continue
		}
		v := litWord(s[j+1:])
		if j+1 == len(s) {
			if i+1 >= len(ws) {
				return i, nil
			}
			i++
			v = ws[i]
		}
		if ch == 'F' || ch == 'I' {
			return i, c.tarCommand(v, text, sc)
		}
		return i, nil
	}
	return i, nil
}

// tarComputed judges a word computed at run time. When its literal start
// names an option that runs a command (--to-command="$X"), the command is
// computed and refused, as is a computed option name (--"$X"). A word with
// no literal start is taken as the file name it nearly always is
// (tar czf out.tgz "$dir"), although it could hold --to-command=...: a
// documented gap.
func (c *checker) tarComputed(w word, text string, sc scope) *Blocked {
	if sc.mode != modeScript || !strings.HasPrefix(w.prefix, "--") {
		return nil
	}
	name, val, eq := strings.Cut(w.prefix[2:], "=")
	switch {
	case !eq:
		return block(text, "a tar option computed at run time could run a command")
	case len(name) > len("checkpoint") && prefixOf(name, "checkpoint-action"):
		return c.tarCheckpoint(word{text: w.text[len(w.prefix)-len(val):], prefix: val}, text, sc)
	case tarCommandOption(name):
		return block(text, "the command tar runs is computed at run time")
	}
	return nil
}

// tarCommandOption reports whether name, perhaps abbreviated as getopt
// allows, is one of tarCommandLong.
func tarCommandOption(name string) bool {
	if len(name) < 2 {
		return false
	}
	for _, long := range tarCommandLong {
		if prefixOf(name, long) {
			return true
		}
	}
	return false
}

// tarCommand judges the value of a tar option that tar runs as a command.
func (c *checker) tarCommand(v word, text string, sc scope) *Blocked {
	if !v.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block(text, "the command tar runs is computed at run time")
	}
	if b := c.script(v.text, scope{depth: sc.depth + 1, mode: sc.mode}); b != nil {
		b.Reason += " (run by tar)"
		return b
	}
	return nil
}

// tarCheckpoint judges --checkpoint-action=ACTION: only exec=CMD runs
// anything.
func (c *checker) tarCheckpoint(v word, text string, sc scope) *Blocked {
	if !v.lit {
		if sc.mode == modeScript && (strings.HasPrefix(v.prefix, "exec") || strings.HasPrefix("exec=", v.prefix)) {
			return block(text, "a tar checkpoint action computed at run time could run a command")
		}
		return nil
	}
	cmd, ok := strings.CutPrefix(v.text, "exec=")
	if !ok {
		return nil
	}
	return c.tarCommand(litWord(cmd), text, sc)
}

// tarOptionsVar judges TAR_OPTIONS, whose words tar reads before its own.
func (c *checker) tarOptionsVar(val word, cmd string, sc scope) *Blocked {
	if !val.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block(cmd, "TAR_OPTIONS computed at run time could hold an option that runs a command")
	}
	// tar splits TAR_OPTIONS into words with quotes and backslashes the
	// way a shell does.
	ws := []word{litWord("tar")}
	if args, ok := shellWords(val.text); ok {
		ws = append(ws, args...)
	} else {
		for _, f := range strings.Fields(val.text) {
			ws = append(ws, litWord(f))
		}
	}
	if b := c.tar(ws, sc); b != nil {
		b.Reason += " (in TAR_OPTIONS)"
		return b
	}
	return nil
}

// shellWords splits s into words as a shell would, without expansions; ok
// is false when s is not one simple command of plain words.
func shellWords(s string) ([]word, bool) {
	f, err := syntax.NewParser().Parse(strings.NewReader(s), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	ce, isCall := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !isCall || len(ce.Assigns) > 0 || len(f.Stmts[0].Redirs) > 0 {
		return nil, false
	}
	ws := make([]word, 0, len(ce.Args))
	for _, a := range ce.Args {
		ws = append(ws, evalWord(a))
	}
	return ws, true
}
