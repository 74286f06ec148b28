package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docExample is the example tool of docs/architecture.md's "Adding a
// tool", as its Go blocks give it.
type docExample struct {
	section string // the section's text
	tool    string // the tool's name, from the row
	file    string // the tool's file, whole
	row     string // its row in toolsets()
	builder string // its builder method
}

var docRow = regexp.MustCompile(`^\{"([a-z0-9_]+)", \(\*builder\)\.`)

// readAddingATool reads the section and sorts its Go blocks by what they
// hold: the file (package tools), the row, the builder method.
func readAddingATool(t *testing.T) docExample {
	t.Helper()
	doc := readDoc(t, "docs/architecture.md")
	_, section, ok := strings.Cut(doc, "\n## Adding a tool\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Adding a tool" section`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	ex := docExample{section: section}
	for _, block := range goBlocks(section) {
		switch {
		case strings.HasPrefix(block, "package tools\n"):
			ex.file = block
		case strings.HasPrefix(block, "func (b *builder) "):
			ex.builder = block
		case docRow.MatchString(block):
			ex.row = strings.TrimSpace(block)
			ex.tool = docRow.FindStringSubmatch(block)[1]
		}
	}
	if ex.file == "" || ex.row == "" || ex.builder == "" {
		t.Fatalf("the section's Go blocks should give the file (package tools), the row ({\"name\", (*builder).method, ...}) and the builder method (func (b *builder) ...); found file %t, row %t, builder %t",
			ex.file != "", ex.row != "", ex.builder != "")
	}
	return ex
}

// goBlocks returns the ```go blocks of a Markdown text, without the
// indentation of the list item they are in.
func goBlocks(md string) []string {
	var blocks []string
	var cur []string
	indent, in := "", false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case !in && trimmed == "```go":
			in, indent, cur = true, line[:len(line)-len(trimmed)], nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// overlay writes the files that adding the example changes, as `go
// build -overlay` takes them (the checkout is left alone): the tool's
// file, toolsets.go with the row in the files toolset, the builder
// method, and a test that calls the tool with its sample. It returns the
// overlay file's path.
func (ex docExample) overlay(t *testing.T, root string) string {
	t.Helper()
	toolsets := filepath.Join(root, "internal", "app", "toolsets.go")
	src, err := os.ReadFile(toolsets)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(src, []byte(`{"`+ex.tool+`",`)) {
		t.Fatalf("%s is a real tool now: give docs/architecture.md's \"Adding a tool\" an example of another name", ex.tool)
	}
	const files = "\t\t{Files, []toolDef{\n"
	if bytes.Count(src, []byte(files)) != 1 {
		t.Fatalf("toolsets.go has no one line %q to put the example's row after; update this test", files)
	}
	withRow := strings.Replace(string(src), files, files+"\t\t\t"+ex.row+"\n", 1)
	builder := "package app\n\nimport (\n\t\"github.com/countbot/toolsvc/internal/registry\"\n\t\"github.com/countbot/toolsvc/internal/tools\"\n)\n\n" + ex.builder
	dir := t.TempDir()
	replace := map[string]string{}
	for path, content := range map[string]string{
		filepath.Join(root, "internal", "tools", ex.tool+".go"): ex.file,
		toolsets: withRow,
		filepath.Join(root, "internal", "app", "doc_example_builder.go"):   builder,
		filepath.Join(root, "internal", "app", "doc_example_tool_test.go"): fmt.Sprintf(docExampleTest, ex.tool),
	} {
		tmp := filepath.Join(dir, filepath.Base(path))
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[path] = tmp
	}
	b, _ := json.Marshal(map[string]any{"Replace": replace})
	p := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// docExampleTest is a test of internal/app, present only in the overlay:
// the example tool, registered by its row, answers a call with its sample.
const docExampleTest = `package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
)

func TestDocExampleToolRuns(t *testing.T) {
	a := everyTool(t, "http://127.0.0.1:9/v1")
	if err := os.WriteFile(filepath.Join(a.cfg.Workspace, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool, ok := a.reg.Tool(%[1]q)
	if !ok {
		t.Fatal("%[1]s is not registered")
	}
	s, _ := tool.(interface{ Sample() json.RawMessage })
	if s == nil {
		t.Fatal("%[1]s has no Sample method")
	}
	res := a.reg.Invoke(context.Background(), %[1]q, s.Sample(), registry.Meta{SessionID: "doc"})
	if res.Status != registry.StatusSuccess {
		t.Fatalf("%[1]s with its sample %%s: %%s", s.Sample(), res.Result)
	}
	t.Logf("%[1]s: %%s", res.Result)
}
`

// testRun is what `go test -json` said about one test, subtests folded
// into their test.
type testRun struct {
	failed, passed bool
	output         strings.Builder
}

// said is the run's output without the lines of tests starting, pausing
// and passing.
func (r *testRun) said() string {
	var keep []string
	for _, l := range strings.SplitAfter(r.output.String(), "\n") {
		f := strings.TrimSpace(l)
		if !strings.HasPrefix(f, "=== ") && !strings.HasPrefix(f, "--- PASS") && f != "PASS" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// goTestJSON runs `go test -json` in root with args, and returns each
// test's run by package and name ("internal/app TestX", "internal/app
// TestX/sub"); "internal/app" alone holds what is not a test's (a build
// failure).
func goTestJSON(t *testing.T, root string, args ...string) map[string]*testRun {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"test", "-json", "-count=1"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // a failing test is an exit status; the events say which
	runs := map[string]*testRun{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var ev struct{ Action, Package, ImportPath, Test, Output string }
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("go test %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		// A build event's ImportPath may add " [<package>.test]".
		pkg, _, _ := strings.Cut(strings.TrimPrefix(ev.Package+ev.ImportPath, "github.com/countbot/toolsvc/"), " ")
		keys := []string{pkg}
		if ev.Test != "" {
			top, _, _ := strings.Cut(ev.Test, "/")
			keys = []string{pkg + " " + top, pkg + " " + ev.Test}
		}
		for _, k := range slices.Compact(keys) {
			r := runs[k]
			if r == nil {
				r = &testRun{}
				runs[k] = r
			}
			r.output.WriteString(ev.Output)
			r.failed = r.failed || ev.Action == "fail" || ev.Action == "build-fail"
			r.passed = r.passed || ev.Action == "pass"
		}
	}
	if stderr.Len() > 0 {
		t.Logf("go test %s: %s", strings.Join(args, " "), stderr.Bytes())
	}
	return runs
}

// TestDocAddingATool adds the example tool of docs/architecture.md's
// "Adding a tool" to the code exactly as the section writes it (the file,
// the row, the builder method; in a build overlay, so that the checkout is
// left alone) and runs the tests that walk every tool: the tool registers
// and answers its sample, and the only failures are the further steps the
// section lists, each saying what to do.
func TestDocAddingATool(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests internal/app and cmd/toolsvc again with the example added")
	}
	ex := readAddingATool(t)
	if formatted, err := format.Source([]byte(ex.file)); err != nil || string(formatted) != ex.file {
		t.Errorf("the example's file is not gofmt-formatted (%v)", err)
	}
	for _, want := range []string{"internal/tools/" + ex.tool + ".go", "| `" + ex.tool + "` |"} {
		if !strings.Contains(ex.section, want) {
			t.Errorf("the section does not name %s", want)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	overlay := "-overlay=" + ex.overlay(t, root)
	// All of internal/app, where the tests that walk every tool live; of
	// cmd/toolsvc only those that walk the tools' names (the README's
	// table, the switches, the tools file example whose names a built-in
	// tool must not take): its other end-to-end tests take minutes.
	runs := goTestJSON(t, root, overlay, "./internal/app")
	for k, r := range goTestJSON(t, root, overlay, "-run", "^(TestReadmeShape|TestToolSwitches|TestCustomToolsExample)$", "./cmd/toolsvc") {
		runs[k] = r
	}
	checkDocExampleRuns(t, ex, runs)
}

// stopped fails t when a package failed with no test failing: it did not
// build, or its tests stopped (a panic, a time-out).
func stopped(t *testing.T, runs map[string]*testRun) {
	testFailed := map[string]bool{} // by package
	for k, r := range runs {
		if pkg, _, isTest := strings.Cut(k, " "); isTest && r.failed {
			testFailed[pkg] = true
		}
	}
	for k, r := range runs {
		if pkg, _, isTest := strings.Cut(k, " "); !isTest && r.failed && !testFailed[pkg] {
			t.Fatalf("with the example added, %s does not build or its tests stop:\n%s", k, r.said())
		}
	}
}

// checkDocExampleRuns holds the runs of the tests with the example added
// to what the section says: the failures it lists (each message saying
// what to do, and the section saying it too), and the tests that show the
// tool registered and called passing.
func checkDocExampleRuns(t *testing.T, ex docExample, runs map[string]*testRun) {
	listed := map[string]struct{ says, section string }{
		"internal/app TestToolSchemasTestdata": {"go test ./internal/app -run TestToolSchemasTestdata -update", "go test ./internal/app -run TestToolSchemasTestdata -update"},
		"cmd/toolsvc TestReadmeShape":          {"README.md's tool table lacks " + ex.tool + ": add the row", "README.md's tool table"},
	}
	stopped(t, runs)
	for _, k := range slices.Sorted(maps.Keys(runs)) {
		r := runs[k]
		_, test, isTest := strings.Cut(k, " ")
		if !r.failed || !isTest || strings.Contains(test, "/") {
			continue // passed; a package, failed by its tests; a subtest, which its test reports
		}
		want, ok := listed[k]
		switch {
		case !ok:
			t.Errorf("with the example added, %s fails, and the section does not list what to do about it:\n%s", k, r.said())
		case !strings.Contains(r.said(), want.says):
			t.Errorf("with the example added, %s fails without saying %q:\n%s", k, want.says, r.said())
		case !strings.Contains(ex.section, want.section):
			t.Errorf("%s fails with the example added, and the section does not mention %q", k, want.section)
		}
	}
	for _, k := range []string{
		"internal/app TestDocExampleToolRuns", "internal/app TestSamples/" + ex.tool,
		"internal/app TestStrictNulls/" + ex.tool, "internal/app TestSchemasMatchArgs/" + ex.tool,
		"internal/app TestEveryToolMatchesItsRow", "internal/app TestRowsHaveHints",
		"cmd/toolsvc TestToolSwitches",
	} {
		if r := runs[k]; r == nil || !r.passed {
			t.Errorf("with the example added, %s did not pass", k)
		}
	}
	for k, want := range listed {
		if r := runs[k]; r == nil || !r.failed {
			t.Errorf("%s passes with the example added: drop the section's step that mentions %q, and %s from this test's list", k, want.section, k)
		}
	}
}
