package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureMapIsComplete: every package under internal/ is named in
// docs/architecture.md's layout, so that a newcomer reading the map finds
// every part of the house. A package is named by its path below internal/
// ("mcpmount", "agent/agenttest"), or, for a package in a list of
// siblings ("procgroup, headtail"), by its last element beside its
// parent's path. go-trafilatura's own internal packages, copied in with it
// (internal/extract/trafilatura/internal/...), are its own business: the
// map names the copy.
func TestArchitectureMapIsComplete(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	layout := section(string(doc), "## Layout")
	if layout == "" {
		t.Fatal(`docs/architecture.md has no "## Layout" section`)
	}
	root := filepath.Join("..", "..", "internal")
	var missing []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Name() == "testdata" || strings.HasPrefix(rel, "extract/trafilatura/internal"):
			return filepath.SkipDir
		case rel == "." || !holdsGo(path):
			return nil
		}
		if !named(layout, rel) {
			missing = append(missing, "internal/"+rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range missing {
		t.Errorf("%s is not on the map: add a line for it to the layout in docs/architecture.md (what it is for, in a few words)", p)
	}
}

// section returns the text of a markdown section from its heading to the
// next heading of the same level.
func section(doc, heading string) string {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return ""
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// holdsGo reports whether dir holds a Go file that is not a test's.
func holdsGo(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}

// named reports whether the layout names the package at rel (its path
// below internal/) as a word of its own.
func named(layout, rel string) bool {
	word := func(s string) bool {
		return regexp.MustCompile(`(^|[^A-Za-z0-9_/])` + regexp.QuoteMeta(s) + `($|[^A-Za-z0-9_])`).MatchString(layout)
	}
	if word("internal/"+rel) || word(rel) {
		return true
	}
	// A nested package named in its parent's entry: "internal/pgstore/
	// ... pgtest gives a test its database" names pgstore/pgtest. An
	// entry is a line that starts a path and the indented lines after it.
	parent, base := filepath.Dir(rel), filepath.Base(rel)
	if parent == "." {
		return false
	}
	var entry strings.Builder
	for _, line := range append(strings.Split(layout, "\n"), "") {
		if line != "" && (line[0] == ' ' || line[0] == '\t') {
			entry.WriteString(line + "\n")
			continue
		}
		if e := entry.String(); strings.Contains(e, "internal/"+parent+"/") && regexp.MustCompile(`(^|[^A-Za-z0-9_/])`+regexp.QuoteMeta(base)+`($|[^A-Za-z0-9_])`).MatchString(e) {
			return true
		}
		entry.Reset()
		entry.WriteString(line + "\n")
	}
	return false
}
