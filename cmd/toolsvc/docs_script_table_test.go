//go:build unix

package main

import (
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// The tests of the doc runner's reading of pages and of its comparisons.

func TestParsePage(t *testing.T) {
	page := strings.Join([]string{
		"# Title", // 1
		"",        // 2
		"```sh",   // 3
		"curl -s localhost:8080/a -d '{\"x\": 1}'", // 4
		"# {\"status\":\"success\",",               // 5
		"#  \"result\": \"...\", ...}",             // 6
		"# prose, not an output",                   // 7
		"printf 'a\\n' \\",                         // 8
		"  | tr a b      # => b",                   // 9
		"false",                                    // 10
		"# exit status 1",                          // 11
		"```",                                      // 12
		"<!-- not run: needs a Docker engine -->",  // 13
		"```bash",                                  // 14
		"docker compose up",                        // 15
		"```",                                      // 16
		"<!-- run: setup",                          // 17
		"mkdir -p notes",                           // 18
		"-->",                                      // 19
		"```console",                               // 20
		"$ echo one",                               // 21
		"one",                                      // 22
		"```",                                      // 23
		"<!-- output -->",                          // 24
		"```text",                                  // 25
		"two",                                      // 26
		"```",                                      // 27
		"```yaml",                                  // 28
		"not: run",                                 // 29
		"```",                                      // 30
		"```sh",                                    // 31
		"cat <<'EOF'",                              // 32
		"x",                                        // 33
		"EOF",                                      // 34
		"```",                                      // 35
	}, "\n")
	_, err := parsePage(page, bashComplete)
	if err == nil || !strings.Contains(err.Error(), "already shows its output") {
		t.Fatalf("an output block after a console command's output: %v, want an error", err)
	}
	page = strings.Replace(page, "one\n```\n<!-- output -->", "```\n<!-- output -->", 1)
	blocks, err := parsePage(page, bashComplete)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{line: 3, cmds: []docCmd{
			{line: 4, text: "curl -s localhost:8080/a -d '{\"x\": 1}'", wantJSON: "{\"status\":\"success\", \"result\": \"...\", ...}", hasWant: true},
			{line: 8, text: "printf 'a\\n' \\\n  | tr a b      # => b", wantText: []string{"b"}, hasWant: true},
			{line: 10, text: "false", wantExit: 1},
		}},
		{line: 14, skip: "needs a Docker engine", cmds: []docCmd{{line: 15, text: "docker compose up"}}},
		{line: 17, cmds: []docCmd{{line: 18, text: "mkdir -p notes"}}},
		{line: 20, cmds: []docCmd{{line: 21, text: "echo one", wantText: []string{"two"}, hasWant: true}}},
		{line: 30, cmds: []docCmd{{line: 31, text: "cat <<'EOF'\nx\nEOF"}}},
	}
	if !reflect.DeepEqual(blocks, want) {
		t.Errorf("parsePage:\n%+v\nwant\n%+v", blocks, want)
	}
}

func TestParsePageErrors(t *testing.T) {
	tests := []struct{ name, page, want string }{
		{"reason", "<!-- not run: too slow -->\n```sh\nsleep 100\n```\n", "needs"},
		{"unclosed", "```sh\necho 'a\n```\n", "not complete"},
		{"lone output", "<!-- output -->\n```text\na\n```\n", "no command before it"},
		{"fence", "```sh\necho a\n", "unclosed fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parsePage(tt.page, bashComplete); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parsePage: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestCheckOutput(t *testing.T) {
	tests := []struct {
		name string
		cmd  docCmd
		out  string
		ok   bool
	}{
		{"no output shown", docCmd{}, "anything", true},
		{"fields shown", docCmd{hasWant: true, wantJSON: `{"status":"success","result":"Wrote ... to a.md", ...}`},
			`{"call_id":"x","status":"success","result":"Wrote 3 chars to a.md","duration_ms":4}`, true},
		{"wrong value", docCmd{hasWant: true, wantJSON: `{"status":"success"}`}, `{"status":"error"}`, false},
		{"missing field", docCmd{hasWant: true, wantJSON: `{"status":"success","error":{}}`}, `{"status":"success"}`, false},
		{"volatile fields", docCmd{hasWant: true, wantJSON: `{"call_id":"4f0c...","duration_ms":0,"created_at":"2026-01-01"}`},
			`{"call_id":"99","duration_ms":12,"created_at":"2027-05-05"}`, true},
		{"array rest", docCmd{hasWant: true, wantJSON: `[{"type":"function"}, ...]`}, `[{"type":"function"},{"type":"x"}]`, true},
		{"array length", docCmd{hasWant: true, wantJSON: `[1]`}, `[1, 2]`, false},
		{"number", docCmd{hasWant: true, wantJSON: `{"n": 1.0}`}, `{"n": 1}`, true},
		{"not JSON", docCmd{hasWant: true, wantJSON: `{}`}, "401\n", false},
		{"port", docCmd{hasWant: true, wantText: []string{"http://localhost:8080/"}}, "http://localhost:1234/\n", true},
		{"text lines", docCmd{hasWant: true, wantText: []string{"a ... c", "...", "z"}}, "a b c\nx\ny\nz\n", true},
		{"text differs", docCmd{hasWant: true, wantText: []string{"401"}}, "200\n", false},
		{"text extra line", docCmd{hasWant: true, wantText: []string{"a"}}, "a\nb\n", false},
		{"empty", docCmd{hasWant: true}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := checkOutput(tt.cmd, tt.out, 1234); (d == "") != tt.ok {
				t.Errorf("checkOutput(%q) = %q; want ok %v", tt.out, d, tt.ok)
			}
		})
	}
}

func TestServerCommand(t *testing.T) {
	tests := []struct {
		text            string
		fg, bg, toolsvc bool
	}{
		{"./toolsvc", true, false, true},
		{"./toolsvc                             # listens on 127.0.0.1:8080", true, false, true},
		{"./toolsvc &   # or TOOLSVC_ADDR=0.0.0.0:8080 ./toolsvc", false, true, true},
		{"TOOLSVC_API_KEYS=\"me=$(openssl rand -hex 24),ci=x\" \\\nTOOLSVC_POLICY_FILE=policy.yaml ./toolsvc", true, false, true},
		{"./toolsvc audit verify", false, false, false},
		{"./toolsvc -h | head", false, false, false},
		{"python3 -m http.server 9000 >/dev/null 2>&1 &", false, true, false},
		{"a && b", false, false, false},
		{"go build -o toolsvc ./cmd/toolsvc", false, false, false},
	}
	for _, tt := range tests {
		fg, bg, toolsvc := serverCommand(tt.text)
		if fg != tt.fg || bg != tt.bg || toolsvc != tt.toolsvc {
			t.Errorf("serverCommand(%q) = %v, %v, %v; want %v, %v, %v", tt.text, fg, bg, toolsvc, tt.fg, tt.bg, tt.toolsvc)
		}
	}
}

func TestKillCommand(t *testing.T) {
	tests := []struct {
		text string
		sig  syscall.Signal
		jobs []int
		ok   bool
	}{
		{"kill %1", syscall.SIGTERM, []int{1}, true},
		{"kill -INT %2   # as Ctrl-C does", syscall.SIGINT, []int{2}, true},
		{"kill -TERM %1", syscall.SIGTERM, []int{1}, true},
		{"kill %1 %2 %3", syscall.SIGTERM, []int{1, 2, 3}, true},
		{"kill 1234", 0, nil, false},
		{"kill %1; echo done", 0, nil, false},
		{"pkill toolsvc", 0, nil, false},
	}
	for _, tt := range tests {
		sig, jobs, ok := killCommand(tt.text)
		if sig != tt.sig || !reflect.DeepEqual(jobs, tt.jobs) || ok != tt.ok {
			t.Errorf("killCommand(%q) = %v, %v, %v; want %v, %v, %v", tt.text, sig, jobs, ok, tt.sig, tt.jobs, tt.ok)
		}
	}
}

func TestServerPort(t *testing.T) {
	for text, want := range map[string]int{
		"./toolsvc": 4321,
		"TOOLSVC_ADDR=127.0.0.1:8081 TOOLSVC_REPLICA_ID=r1 ./toolsvc &": 8081,
		"TOOLSVC_REPLICA_ID=r2 TOOLSVC_ADDR=:8082 ./toolsvc &":          8082,
		"TOOLSVC_API_KEYS=x ./toolsvc # TOOLSVC_ADDR=127.0.0.1:9":       4321,
	} {
		if got := serverPort(text, 4321); got != want {
			t.Errorf("serverPort(%q) = %d; want %d", text, got, want)
		}
	}
}

func TestWithPort(t *testing.T) {
	for in, want := range map[string]string{
		"curl -s localhost:8080/tools":  "curl -s localhost:4321/tools",
		"TOOLSVC_ADDR=0.0.0.0:8080 x":   "TOOLSVC_ADDR=0.0.0.0:4321 x",
		"127.0.0.1:8080 and :8080":      "127.0.0.1:4321 and :4321",
		"localhost:80800 and 18080":     "localhost:80800 and 18080",
		"listens on 127.0.0.1:8080, ok": "listens on 127.0.0.1:4321, ok",
	} {
		if got := withPort(in, 4321); got != want {
			t.Errorf("withPort(%q) = %q; want %q", in, got, want)
		}
	}
}
