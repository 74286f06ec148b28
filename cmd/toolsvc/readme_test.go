package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/app"
)

// The README is what a newcomer reads first; these tests keep it short,
// keep its links and tool table true, and run its quick start's calls
// against the real service.

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

// curlCall is one curl command of the README's quick start, as the service
// sees it.
type curlCall struct {
	line, method, path, body string
	header                   map[string]string
	wantCode                 int    // from a "-w '%{http_code}'" line's comment
	wantStatus               string // from the documented result that follows
}

// TestReadmeQuickStart runs the calls of the README's quick start in order
// against the real service: without keys first, and with the key it
// exports after `export TOOLSVC_API_KEYS=`. Each must answer as the README
// says: 200 and the documented status of the tool call, or the HTTP status
// its comment names.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	start := strings.Index(readme, "## Quick start")
	if start < 0 {
		t.Fatal("README.md has no Quick start section")
	}
	section := readme[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	const key = "quickstart-key-0123456789abcdef"
	open, keyed := startConfig(t, nil), startConfig(t, map[string]string{"API_KEYS": key})
	s := open
	calls := 0
	for _, block := range shBlocks(section) {
		if strings.Contains(block, "export TOOLSVC_API_KEYS=") {
			s = keyed
		}
		for _, c := range parseCurls(t, block, key) {
			calls++
			t.Run(c.line, func(t *testing.T) {
				var body *strings.Reader
				if c.method == http.MethodPost {
					body = strings.NewReader(c.body)
				} else {
					body = strings.NewReader("")
				}
				resp, got := s.do(t, c.method, c.path, body, c.header)
				want := c.wantCode
				if want == 0 {
					want = http.StatusOK
				}
				if resp.StatusCode != want {
					t.Fatalf("%d, the README says %d: %s", resp.StatusCode, want, got)
				}
				if c.wantStatus != "" {
					var res struct{ Status, Result string }
					if err := json.Unmarshal(got, &res); err != nil || res.Status != c.wantStatus {
						t.Errorf("status %q, the README shows %q: %s", res.Status, c.wantStatus, got)
					}
				}
			})
		}
	}
	if calls < 5 {
		t.Errorf("only %d curl calls in the quick start", calls)
	}
}

// shBlocks returns the bodies of the ```sh blocks of text.
func shBlocks(text string) []string {
	var out []string
	for {
		i := strings.Index(text, "```sh\n")
		if i < 0 {
			return out
		}
		text = text[i+len("```sh\n"):]
		j := strings.Index(text, "```")
		if j < 0 {
			return out
		}
		out = append(out, text[:j])
		text = text[j:]
	}
}

var documentedStatus = regexp.MustCompile(`"status":"(success|error)"`)

// parseCurls reads the curl commands of a shell block (continued lines
// joined; a pipe and what follows dropped), with $TOOLSVC_API_KEYS as key.
func parseCurls(t *testing.T, block, key string) []curlCall {
	t.Helper()
	var calls []curlCall
	lines := strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") {
			if len(calls) > 0 && strings.HasPrefix(line, "# {") {
				if m := documentedStatus.FindStringSubmatch(line); m != nil && calls[len(calls)-1].wantStatus == "" {
					calls[len(calls)-1].wantStatus = m[1]
				}
			}
			continue
		}
		words, comment := shellWords(t, line)
		c := curlCall{line: strings.Join(strings.Fields(lines[i]), " "), method: http.MethodGet, header: map[string]string{}}
		for j := 1; j < len(words); j++ {
			w := strings.ReplaceAll(words[j], "$TOOLSVC_API_KEYS", key)
			switch {
			case w == "|":
				j = len(words)
			case w == "-H" && j+1 < len(words):
				j++
				k, v, _ := strings.Cut(strings.ReplaceAll(words[j], "$TOOLSVC_API_KEYS", key), ":")
				c.header[strings.TrimSpace(k)] = strings.TrimSpace(v)
			case w == "-d" && j+1 < len(words):
				j++
				c.method, c.body = http.MethodPost, words[j]
				if _, ok := c.header["Content-Type"]; !ok {
					c.header["Content-Type"] = "application/x-www-form-urlencoded" // what curl -d sends
				}
			case w == "-o" || w == "-w":
				j++
			case strings.HasPrefix(w, "localhost:8080"):
				c.path = strings.TrimPrefix(w, "localhost:8080")
			}
		}
		if strings.Contains(line, "%{http_code}") {
			if m := regexp.MustCompile(`\b([1-5][0-9][0-9])\b`).FindStringSubmatch(comment); m != nil {
				c.wantCode = atoi(m[1])
			}
		}
		if c.path == "" {
			t.Fatalf("README curl without a localhost:8080 URL: %s", line)
		}
		calls = append(calls, c)
	}
	return calls
}

// shellWords splits a command line as sh does for the quoting the README
// uses (single and double quotes, no escapes inside single quotes), and
// returns the comment after an unquoted #.
func shellWords(t *testing.T, line string) (words []string, comment string) {
	t.Helper()
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unclosed quote: %s", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				t.Fatalf("unclosed quote: %s", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, line[i:]
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, ""
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}
