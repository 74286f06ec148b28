package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/app"
	"github.com/countbot/toolsvc/internal/desktop/desktoptest"
)

// toolLines returns the start-up log's tool lines: state and reason by
// tool, failing on a tool with more than one line.
func toolLines(t *testing.T, s *testServer) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, line := range strings.Split(s.Logs(), "\n") {
		var m struct{ Message, Tool, State, Reason string }
		if json.Unmarshal([]byte(line), &m) != nil || m.Message != "tool" {
			continue
		}
		if _, dup := out[m.Tool]; dup {
			t.Errorf("two start-up lines for %s", m.Tool)
		}
		out[m.Tool] = [2]string{m.State, m.Reason}
	}
	return out
}

// switchedOn returns whether the switches in env (TOOLS_ENABLED,
// TOOLS_DISABLED) leave a tool on, reading their tool and toolset names
// by app.Toolsets.
func switchedOn(env map[string]string) func(tool string) bool {
	names := func(list string) map[string]bool {
		out := map[string]bool{}
		for _, n := range strings.Split(list, ",") {
			n = strings.TrimSpace(n)
			for _, set := range app.Toolsets() {
				for _, tool := range set.Tools {
					if n == set.Name || n == tool {
						out[tool] = true
					}
				}
			}
		}
		return out
	}
	enabled, disabled := names(env["TOOLS_ENABLED"]), names(env["TOOLS_DISABLED"])
	return func(tool string) bool {
		return (env["TOOLS_ENABLED"] == "" || enabled[tool]) && !disabled[tool]
	}
}

// TestToolSwitches: TOOLSVC_TOOLS_ENABLED and TOOLSVC_TOOLS_DISABLED,
// with tool and toolset names, decide what GET /tools advertises; every
// tool left out is in /readyz with the reason, a call to it is an unknown
// tool, and the start-up log has one line per tool.
//
// What each case serves is derived, so that a new tool needs no line
// here: the tools a start without switches serves, less those the case's
// switches leave out and those its off names for another reason (a
// case's other settings may only turn tools off, and off names them).
func TestToolSwitches(t *testing.T) {
	t.Parallel()
	baseline := startServer(t, nil).toolNames(t)
	// The derived lists are not empty: a start without switches serves
	// the files toolset at least.
	for _, set := range app.Toolsets() {
		if set.Name != app.Files {
			continue
		}
		for _, tool := range set.Tools {
			if !slices.Contains(baseline, tool) {
				t.Fatalf("a start without switches does not serve %s: GET /tools = %v", tool, baseline)
			}
		}
	}
	cases := []struct {
		name string
		env  map[string]string
		off  map[string]string // /readyz reasons
	}{
		{"toolset and tool disabled", map[string]string{"TOOLS_DISABLED": "shell, screenshot", "MEMORY_ENABLED": "false"},
			map[string]string{"exec": "off: switched off by TOOLSVC_TOOLS_DISABLED", "screenshot": "off: switched off by TOOLSVC_TOOLS_DISABLED",
				"memory": "off: TOOLSVC_MEMORY_ENABLED is false"}},
		{"only toolsets enabled", map[string]string{"TOOLS_ENABLED": "files,memory"},
			map[string]string{"exec": "off: not in TOOLSVC_TOOLS_ENABLED", "web_fetch": "off: not in TOOLSVC_TOOLS_ENABLED"}},
		{"disabled wins over enabled", map[string]string{"TOOLS_ENABLED": "files,exec", "TOOLS_DISABLED": "write_file,edit_file,exec", "EXEC_SANDBOX": "none"},
			map[string]string{"write_file": "off: switched off by TOOLSVC_TOOLS_DISABLED", "exec": "off: switched off by TOOLSVC_TOOLS_DISABLED"}},
	}
	for _, tc := range cases {
		on := switchedOn(tc.env)
		want := []string{} // GET /tools, sorted as baseline is
		for _, tool := range baseline {
			if on(tool) && tc.off[tool] == "" {
				want = append(want, tool)
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, tc.env)
			if got := s.toolNames(t); !slices.Equal(got, want) {
				t.Errorf("GET /tools = %v, want %v", got, want)
			}
			code, r := s.readyz(t)
			if code != 200 {
				t.Errorf("/readyz %d: %+v", code, r)
			}
			for tool, why := range tc.off {
				if r.Checks["tool:"+tool] != why {
					t.Errorf("/readyz tool:%s = %q, want %q", tool, r.Checks["tool:"+tool], why)
				}
				if resp, body := s.do(t, "GET", "/tools/"+tool, nil, nil); resp.StatusCode != 404 {
					t.Errorf("GET /tools/%s of a tool switched off: %d %s", tool, resp.StatusCode, body)
				}
			}
			lines := toolLines(t, s)
			for _, set := range app.Toolsets() {
				for _, tool := range set.Tools {
					l, ok := lines[tool]
					on := slices.Contains(want, tool)
					switch {
					case !ok:
						t.Errorf("no start-up line for %s", tool)
					case on && l[0] != "on":
						t.Errorf("%s is served but logged %v", tool, l)
					case !on && (l[0] != "off" || l[1] == ""):
						t.Errorf("%s is not served but logged %v", tool, l)
					}
				}
			}
		})
	}
}

// TestToolSwitchUnknownName: a name that is neither a tool nor a toolset
// stops start-up with the nearest known name.
func TestToolSwitchUnknownName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, want string }{
		{"TOOLS_DISABLED", "shel", `TOOLSVC_TOOLS_DISABLED: "shel" is neither a tool nor a toolset (did you mean "shell"?)`},
		{"TOOLS_ENABLED", "files,read_files", `TOOLSVC_TOOLS_ENABLED: "read_files" is neither a tool nor a toolset (did you mean "read_file"?)`},
		{"TOOLS_ENABLED", "browser", `"browser" is neither a tool nor a toolset (toolsets: files = read_file`},
	} {
		// nil: the service started.
		if err := startError(t, map[string]string{tc.name: tc.value}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: start-up = %v, want %q", tc.name, tc.value, err, tc.want)
		}
	}
}

// TestUnknownVariableStopsStartup: a TOOLSVC_* variable that is no
// setting stops start-up with the nearest name; TOOLSVC_TEST_* is left to
// tests.
func TestUnknownVariableStopsStartup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, want string }{
		{"TOOLSVC_API_KEY", "TOOLSVC_API_KEY is not a setting; did you mean TOOLSVC_API_KEYS?"},
		{"TOOLSVC_TOOL_DISABLED", "did you mean TOOLSVC_TOOLS_DISABLED?"},
		{"TOOLSVC_EXEC_SANDBOXING", "did you mean TOOLSVC_EXEC_SANDBOX?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := startError(t, map[string]string{strings.TrimPrefix(tc.name, "TOOLSVC_"): "x"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run() = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("TOOLSVC_TEST_ passes", func(t *testing.T) {
		t.Parallel()
		// Starts, then stops at once.
		if err := startError(t, map[string]string{"TEST_AS_USER": "1"}); err != nil {
			t.Errorf("run() = %v", err)
		}
	})
}

// TestScreenshotNeedsBrowserOrDisplay: without Chromium and without an X
// display, screenshot could only fail, so it is not advertised and
// /readyz says why; either one of them is enough to offer it.
//
// Not parallel: the service finds the X display in DISPLAY, which the test
// sets for the whole process.
func TestScreenshotNeedsBrowserOrDisplay(t *testing.T) {
	noChrome := map[string]string{"CHROME_PATH": "/nonexistent/chromium", "TOOLS_ENABLED": "web"}
	t.Run("neither", func(t *testing.T) {
		t.Setenv("DISPLAY", "")
		s := startServer(t, noChrome)
		if got := s.toolNames(t); !slices.Equal(got, []string{"web_fetch"}) {
			t.Errorf("GET /tools = %v, want web_fetch alone", got)
		}
		_, r := s.readyz(t)
		assertContains(t, "/readyz tool:screenshot", r.Checks["tool:screenshot"],
			`off: web: TOOLSVC_CHROME_PATH="/nonexistent/chromium" cannot be run`, "desktop: no X display (DISPLAY is not set)")
		if l := toolLines(t, s)["screenshot"]; l[0] != "off" {
			t.Errorf("start-up line of screenshot: %v", l)
		}
		if resp, body := s.do(t, "POST", "/tools/screenshot/invoke", strings.NewReader(`{"type":"desktop"}`), nil); resp.StatusCode != 404 {
			t.Errorf("a call to screenshot: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("display only", func(t *testing.T) {
		desktoptest.Xvfb(t, "640x480x24")
		s := startServer(t, noChrome)
		if got := s.toolNames(t); !slices.Contains(got, "screenshot") {
			t.Errorf("GET /tools = %v, want screenshot for the desktop", got)
		}
		mustSucceed(t, s.invoke(t, "screenshot", map[string]any{"type": "desktop"}))
		mustFail(t, s.invoke(t, "screenshot", map[string]any{"type": "web", "url": "https://example.com/"}), "unavailable", "TOOLSVC_CHROME_PATH")
	})
}
