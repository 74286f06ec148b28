package registry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/callinfo"
)

// onlyPolicy lets the key "limited" call the tools in allowed, and every
// other key every tool.
type onlyPolicy struct{ allowed map[string]bool }

func (p onlyPolicy) Allows(key, tool string) bool         { return key != "limited" || p.allowed[tool] }
func (p onlyPolicy) SeesAll(key string) bool              { return key != "limited" }
func (p onlyPolicy) Folder(string) string                 { return "" }
func (p onlyPolicy) Admit(string) (time.Duration, string) { return 0, "" }
func (p onlyPolicy) Release(string)                       {}
func (p onlyPolicy) Generation() uint64                   { return 1 }

// TestUnknownToolSuggestions: a call of a tool that does not exist names
// the closest tools the key may call, and never one it may not; a tool the
// key may not call answers exactly as a name no tool has.
func TestUnknownToolSuggestions(t *testing.T) {
	reg := New(Options{Policy: onlyPolicy{allowed: map[string]bool{"read_file": true, "list_dir": true}}})
	for _, n := range []string{"read_file", "write_file", "edit_file", "list_dir", "exec", "web_fetch", "filesystem__read_text_file", "Memory"} {
		if err := reg.Register(namedTool{n}); err != nil {
			t.Fatal(err)
		}
	}
	const rest = " Please use only the tools provided in the tool definitions."
	for _, tc := range []struct {
		key, name, want string
	}{
		{"", "reed_file", "Tool 'reed_file' not found. Did you mean read_file?" + rest},
		{"", "wirte_file", "Tool 'wirte_file' not found. Did you mean write_file?" + rest},
		{"", "file_read", "Tool 'file_read' not found. Did you mean read_file?" + rest},
		{"", "read_text_file", "Tool 'read_text_file' not found. Did you mean filesystem__read_text_file?" + rest},
		{"", "memory", "Tool 'memory' not found. Did you mean Memory?" + rest},
		{"", "_file", "Tool '_file' not found." + rest},
		{"", "execute", "Tool 'execute' not found. Did you mean exec?" + rest},
		{"", "shell", "Tool 'shell' not found." + rest},
		{"", "fetch", "Tool 'fetch' not found." + rest},
		{"", "read", "Tool 'read' not found. Did you mean read_file?" + rest},
		{"", "web", "Tool 'web' not found." + rest},
		// Three at most, closest first.
		{"", "xxit_file", "Tool 'xxit_file' not found. Did you mean edit_file or write_file?" + rest},
		{"", "rite_file", "Tool 'rite_file' not found. Did you mean write_file or edit_file or read_file?" + rest},
		// The limited key is told of the tools it may call only.
		{"limited", "rite_file", "Tool 'rite_file' not found. Did you mean read_file?" + rest},
		{"limited", "wirte_file", "Tool 'wirte_file' not found." + rest},
		{"limited", "execute", "Tool 'execute' not found." + rest},
	} {
		t.Run(tc.key+"/"+tc.name, func(t *testing.T) {
			if got := reg.UnknownToolMessageFor(tc.key, tc.name); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			res := reg.Invoke(context.Background(), tc.name, []byte(`{}`), callinfo.Facts{Key: tc.key})
			if res.Error == nil || res.Error.Code != "unknown_tool" || res.Error.Message != tc.want {
				t.Errorf("Invoke: %+v", res.Error)
			}
		})
	}

	// A tool the key may not call: the same answer, name for name, as a
	// name no tool has, and it names no tool the key may not call either.
	denied := reg.Invoke(context.Background(), "write_file", []byte(`{}`), callinfo.Facts{Key: "limited"})
	unknown := reg.Invoke(context.Background(), "wrxte_file", []byte(`{}`), callinfo.Facts{Key: "limited"})
	if denied.Error == nil || unknown.Error == nil ||
		strings.ReplaceAll(denied.Error.Message, "write_file", "X") != strings.ReplaceAll(unknown.Error.Message, "wrxte_file", "X") {
		t.Errorf("denied %+v, unknown %+v", denied.Error, unknown.Error)
	}
	if strings.Contains(denied.Error.Message, "edit_file") || strings.Contains(denied.Error.Message, "Did you mean") {
		t.Errorf("the denied tool's answer names tools: %s", denied.Error.Message)
	}
}

// TestClosestNamesLongName: a name far longer than any tool's is answered
// quickly and with no suggestion.
func TestClosestNamesLongName(t *testing.T) {
	if got := closestNames(strings.Repeat("read_file", 10000), []string{"read_file"}); len(got) != 0 {
		t.Errorf("got %v", got)
	}
}
