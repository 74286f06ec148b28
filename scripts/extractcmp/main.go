// Command extractcmp scores toolsvc's page extraction on the comparison
// benchmark that ships with github.com/markusmobius/go-trafilatura (about
// 950 annotated pages, multilingual news and blogs; each page lists
// snippets its main text must contain and boilerplate it must not), with
// the benchmark's own scoring: a snippet found in the text is a true
// positive ("with") or a false positive ("without"), the F score is
// 2TP / (2TP + FP + FN).
//
// The pages and their annotations are read from the module's folder as
// `go mod download` leaves it; the annotations are the map literal in its
// scripts/comparison/data.go, read with go/parser (nothing of it is copied
// here). scripts/bench-extract-public.sh runs this beside the benchmark's
// own program, so that toolsvc and go-trafilatura are scored in one run.
//
//	go run ./scripts/extractcmp -module DIR [-mode text|markdown] [-misses N]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/extract"
)

// entry is one annotated page.
type entry struct {
	URL, File     string
	With, Without []string
}

// score counts snippets as the benchmark does.
type score struct{ tp, fn, fp, tn int }

func (s *score) add(o score) { s.tp += o.tp; s.fn += o.fn; s.fp += o.fp; s.tn += o.tn }

func (s score) String() string {
	tp, fn, fp, tn := float64(s.tp), float64(s.fn), float64(s.fp), float64(s.tn)
	return fmt.Sprintf("precision %.3f  recall %.3f  accuracy %.3f  F %.3f  (TP %d FN %d FP %d TN %d)",
		tp/(tp+fp), tp/(tp+fn), (tp+tn)/(tp+tn+fp+fn), 2*tp/(2*tp+fp+fn), s.tp, s.fn, s.fp, s.tn)
}

// evaluate is the benchmark's evaluateEntry: an empty text finds nothing.
func evaluate(e entry, text string) score {
	var s score
	for _, w := range e.With {
		if text != "" && strings.Contains(text, w) {
			s.tp++
		} else {
			s.fn++
		}
	}
	for _, w := range e.Without {
		if text != "" && strings.Contains(text, w) {
			s.fp++
		} else {
			s.tn++
		}
	}
	return s
}

func main() {
	module := flag.String("module", "", "folder of github.com/markusmobius/go-trafilatura as downloaded")
	mode := flag.String("mode", "text", "text or markdown")
	misses := flag.Int("misses", 0, "list the N pages with the most wrong snippets")
	show := flag.String("page", "", "print the text extracted from this page (a file name of the benchmark) and stop")
	dump := flag.String("dump", "", "write the extracted texts to this file as JSON ({file: text}), for -against in a later run")
	list := flag.Bool("list", false, "print the annotated pages as JSON ([{URL, File}]) and stop")
	against := flag.String("against", "", "JSON file of another extractor's texts ({file: text}): score it too, and list the pages where the two differ")
	flag.Parse()
	if *module == "" {
		log.Fatal("-module is required")
	}
	ex := extract.New(extract.Options{})
	if *show != "" {
		body, err := readPage(*module, *show)
		if err != nil {
			log.Fatal(err)
		}
		page, err := extractPage(ex, body, nil, *mode)
		fmt.Printf("extractor %s, %d characters, error %v\n%s\n", page.Extractor, len(page.Text), err, page.Text)
		return
	}
	entries, err := annotations(filepath.Join(*module, "scripts", "comparison", "data.go"))
	if err != nil {
		log.Fatal(err)
	}
	if *list {
		_ = json.NewEncoder(os.Stdout).Encode(entries)
		return
	}
	start := time.Now()
	texts, failed := map[string]string{}, 0
	for _, e := range entries {
		body, err := readPage(*module, e.File)
		if err != nil {
			log.Printf("skipped %s: %v", e.File, err)
			continue
		}
		u, _ := url.Parse(e.URL)
		page, err := extractPage(ex, body, u, *mode)
		if err != nil {
			failed++
		}
		texts[e.File] = page.Text
	}
	fmt.Printf("toolsvc internal/extract (%s): %d pages in %.1f s, %d without text\n", *mode, len(texts), time.Since(start).Seconds(), failed)
	fmt.Println(total(entries, texts))
	if *dump != "" {
		b, _ := json.Marshal(texts)
		if err := os.WriteFile(*dump, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if *against != "" {
		b, err := os.ReadFile(*against)
		if err != nil {
			log.Fatal(err)
		}
		var other map[string]string
		if err := json.Unmarshal(b, &other); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", *against, total(entries, other))
		printDiffs(entries, texts, other)
	}
	printMisses(entries, texts, *misses)
}

// extractPage extracts a page as web_fetch does: the charset decoded,
// then the main content found.
func extractPage(ex *extract.Extractor, body []byte, u *url.URL, mode string) (extract.Page, error) {
	decoded, _ := extract.Decode(body, "text/html", true)
	return ex.HTML(context.Background(), decoded, u, extract.Mode(mode))
}

// total scores texts (by file name) over every entry that has one.
func total(entries []entry, texts map[string]string) score {
	var t score
	for _, e := range entries {
		if text, ok := texts[e.File]; ok {
			t.add(evaluate(e, text))
		}
	}
	return t
}

// wrongs is how many snippets s got wrong.
func (s score) wrongs() int { return s.fn + s.fp }

// printDiffs lists the pages where ours and other differ in how many
// snippets they get wrong, ours' worst first.
func printDiffs(entries []entry, ours, other map[string]string) {
	type diff struct {
		file        string
		ours, their score
	}
	var diffs []diff
	for _, e := range entries {
		if _, ok := ours[e.File]; !ok {
			continue
		}
		s, t := evaluate(e, ours[e.File]), evaluate(e, other[e.File])
		if s.wrongs() != t.wrongs() {
			diffs = append(diffs, diff{e.File, s, t})
		}
	}
	sort.SliceStable(diffs, func(i, j int) bool {
		return diffs[i].ours.wrongs()-diffs[i].their.wrongs() > diffs[j].ours.wrongs()-diffs[j].their.wrongs()
	})
	for _, d := range diffs {
		fmt.Printf("%+d  ours FN %d FP %d, theirs FN %d FP %d  %s\n", d.ours.wrongs()-d.their.wrongs(),
			d.ours.fn, d.ours.fp, d.their.fn, d.their.fp, d.file)
	}
}

// printMisses lists the n pages with the most snippets wrong, and which.
func printMisses(entries []entry, texts map[string]string, n int) {
	bad := slices.Clone(entries)
	bad = slices.DeleteFunc(bad, func(e entry) bool { return evaluate(e, texts[e.File]).wrongs() == 0 })
	sort.SliceStable(bad, func(i, j int) bool {
		return evaluate(bad[i], texts[bad[i].File]).wrongs() > evaluate(bad[j], texts[bad[j].File]).wrongs()
	})
	for _, e := range bad[:min(n, len(bad))] {
		text := texts[e.File]
		s := evaluate(e, text)
		fmt.Printf("\n%s (%s): FN %d FP %d\n", e.File, e.URL, s.fn, s.fp)
		for _, w := range e.With {
			if !strings.Contains(text, w) {
				fmt.Printf("  missing: %s\n", w)
			}
		}
		for _, w := range e.Without {
			if text != "" && strings.Contains(text, w) {
				fmt.Printf("  kept: %s\n", w)
			}
		}
	}
}

// readPage reads a page from test-files/comparison or, as the benchmark
// also does, from test-files/mock.
func readPage(module, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(module, "test-files", "comparison", name))
	if err == nil {
		return b, nil
	}
	return os.ReadFile(filepath.Join(module, "test-files", "mock", name))
}

// annotations reads the comparisonData map literal of data.go: URL keys,
// and File, With and Without of each ComparisonEntry.
func annotations(path string) ([]entry, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []entry
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		key, ok := kv.Key.(*ast.BasicLit)
		lit, ok2 := kv.Value.(*ast.CompositeLit)
		if !ok || !ok2 || key.Kind != token.STRING {
			return true
		}
		e := entry{URL: unquote(key.Value)}
		for _, el := range lit.Elts {
			field, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			name, _ := field.Key.(*ast.Ident)
			if name == nil {
				continue
			}
			switch name.Name {
			case "File":
				if v, ok := field.Value.(*ast.BasicLit); ok {
					e.File = unquote(v.Value)
				}
			case "With":
				e.With = stringList(field.Value)
			case "Without":
				e.Without = stringList(field.Value)
			}
		}
		if e.File != "" {
			out = append(out, e)
		}
		return false
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no entries found", path)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, nil
}

func stringList(x ast.Expr) []string {
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		if v, ok := el.(*ast.BasicLit); ok && v.Kind == token.STRING {
			out = append(out, unquote(v.Value))
		}
	}
	return out
}

func unquote(s string) string {
	u, err := strconv.Unquote(s)
	if err != nil {
		return s
	}
	return u
}
