package shellguard

import (
	"path"
	"strings"
)

// progBase returns the program name a command name stands for: its base
// name, or the program it is a copy of when the script made it with cp,
// ln, install or mv.
func (c *checker) progBase(name string) string {
	base := path.Base(name)
	if orig, ok := c.renamed[base]; ok {
		return orig
	}
	return base
}

// copyOpts are the short options taking a value of the programs that copy
// or link files.
var copyOpts = map[string]string{"cp": "tS", "install": "tSmog", "ln": "tS", "mv": "tS"}

// noteCopy records, for cp, ln, install and mv with one source and one
// destination, a destination name that is a copy of a program the guard
// has rules for: `cp /sbin/mkfs.ext4 ./x && ./x` is then judged as mkfs.
// A source computed at run time counts when it names such a program
// ("$(which shred)"). Copies made any other way (cat > file, a compiler,
// a download) are not seen.
func (c *checker) noteCopy(base string, ws []word) {
	argShort, ok := copyOpts[base]
	if !ok {
		return
	}
	var ops []word
	ended := false
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		if ended || !w.lit || len(w.text) < 2 || w.text[0] != '-' {
			ops = append(ops, w)
			continue
		}
		switch s := w.text; {
		case s == "--":
			ended = true
		case s == "-t" || strings.HasPrefix(s, "--target-directory") || strings.HasPrefix(s, "--t"):
			return // sources keep their names in the target folder
		case len(s) == 2 && strings.IndexByte(argShort, s[1]) >= 0:
			i++
		}
	}
	if len(ops) != 2 || !ops[1].lit {
		return
	}
	dst := path.Base(ops[1].text)
	if dst == "." || dst == ".." || dst == "/" {
		return
	}
	src := c.sourceProgram(ops[0])
	if src == "" || src == dst || !c.hasRules(src) {
		return
	}
	if c.renamed == nil {
		c.renamed = map[string]string{}
	}
	c.renamed[dst] = src
}

// sourceProgram names the program a copy's source is: the base name of a
// literal path, or for a computed path the last program with rules named
// in it ("$(command -v shred)" is shred).
func (c *checker) sourceProgram(w word) string {
	if w.lit {
		return c.progBase(w.text)
	}
	found := ""
	for _, f := range strings.FieldsFunc(w.text, func(r rune) bool {
		return !(r == '.' || r == '_' || r == '-' || r == '+' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		if _, wrap := wrappers[f]; wrap || f == "which" || f == "type" || f == "whereis" || f == "readlink" || f == "realpath" {
			continue
		}
		if p := c.progBase(f); c.hasRules(p) {
			found = p
		}
	}
	return found
}
