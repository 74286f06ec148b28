package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/app"
)

// The README is what a newcomer reads first; these tests keep it short
// and keep its links and tool table true. TestDocsRun runs its commands.

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocsConfigurationDocumentsEveryVariable keeps docs/configuration.md
// and `toolsvc help all` naming the same settings.
func TestDocsConfigurationDocumentsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"help", "all"}, nil, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	doc := readDoc(t, "docs/configuration.md")
	n := 0
	for _, line := range strings.Split(out.String(), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 1 || !strings.HasPrefix(line, "TOOLSVC_") {
			continue
		}
		n++
		if !strings.Contains(doc, "`"+fields[0]+"`") {
			t.Errorf("docs/configuration.md lacks %s", fields[0])
		}
	}
	if n < 80 {
		t.Errorf("only %d variables in toolsvc help all", n)
	}
}

// TestReadmeShape checks what makes the README readable in five minutes:
// under 300 lines, the first curl within the first 60, the binary built
// before it is run, the test command, and every built-in tool in its table.
func TestReadmeShape(t *testing.T) {
	readme := readDoc(t, "README.md")
	lines := strings.Split(readme, "\n")
	if len(lines) >= 300 {
		t.Errorf("README.md has %d lines; keep it under 300 and move reference to docs/", len(lines))
	}
	firstCurl := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "curl ") {
			firstCurl = i + 1
			break
		}
	}
	if firstCurl < 0 || firstCurl > 60 {
		t.Errorf("README.md's first curl is on line %d, want within the first 60", firstCurl)
	}
	build := strings.Index(readme, "go build -o toolsvc ./cmd/toolsvc")
	if run := strings.Index(readme, "./toolsvc"); build < 0 || run < build {
		t.Errorf("README.md runs ./toolsvc (at %d) before building it with go build -o toolsvc ./cmd/toolsvc (at %d)", run, build)
	}
	if !strings.Contains(readme, "scripts/test.sh") {
		t.Error("README.md does not give the test command scripts/test.sh")
	}
	for _, set := range app.Toolsets() {
		for _, tool := range set.Tools {
			if !strings.Contains(readme, "| `"+tool+"` |") {
				t.Errorf("README.md's tool table lacks %s: add the row | `%s` | what it does, in a few words | %s |", tool, tool, set.Name)
			}
		}
	}
	if !strings.Contains(readme, "docs/architecture.md#adding-a-tool") || !strings.Contains(readDoc(t, "docs/architecture.md"), "\n## Adding a tool\n") {
		t.Error("README.md does not point to docs/architecture.md's \"Adding a tool\"")
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinksResolve checks that every relative link of the README and the
// docs pages names a file that exists.
func TestDocLinksResolve(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "..", "README.md"))
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), filepath.FromSlash(target))); err != nil {
				t.Errorf("%s links to %s, which does not exist", filepath.Base(page), m[1])
			}
		}
	}
}
