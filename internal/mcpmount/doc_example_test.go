package mcpmount

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/registry"
)

// docPath is the page whose example TestDocExample runs.
const docPath = "../../docs/custom-tools.md"

// TestDocExample runs the mcpServers examples of the docs as they are
// written (npx downloads the packages, reaching its registry only) in the
// strongest sandbox here, and uses the tools they mount. Their HOME, where
// npx keeps the downloads, is kept between runs. The registry's name is
// opened in the network guard, as an operator does where it resolves to a
// non-public address (a mirror: so it does on the project's machines); a
// public one needs nothing.
func TestDocExample(t *testing.T) {
	npmServers(t) // node and npm present, or skip / fail under CI
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]json.RawMessage{}
	rest := string(doc)
	for {
		_, block, ok := strings.Cut(rest, "<!-- mcp-example:begin -->")
		if !ok {
			break
		}
		block, rest, ok = strings.Cut(block, "<!-- mcp-example:end -->")
		if !ok {
			t.Fatal("an example is not closed")
		}
		block = strings.TrimSpace(block)
		block = strings.TrimSuffix(strings.TrimPrefix(block, "```json"), "```")
		var file struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(block), &file); err != nil {
			t.Fatalf("an example is not JSON: %v\n%s", err, block)
		}
		for k, v := range file.MCPServers {
			servers[k] = v
		}
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	home := filepath.Join(base, "toolsvc-test-npm", "npx-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// npx's installs are made afresh from the kept tarballs (npm's
	// _cacache), as the service does after a start it cut short: a run
	// stopped while npx installed leaves a half-made one, which every
	// later npx would take for done (a package's dependency missing).
	if err := os.RemoveAll(filepath.Join(home, ".npm", "_npx")); err != nil {
		t.Fatal(err)
	}
	modes := sandboxModes(t)
	ctx := context.Background()
	checks := map[string]func(t *testing.T, e *env, reg *registry.Registry){
		"memory": func(t *testing.T, e *env, reg *registry.Registry) {
			if r := invoke(reg, ctx, "memory__create_entities", `{"entities":[{"name":"toolsvc","entityType":"service","observations":["serves tools over HTTP"]}]}`); r.Status != registry.StatusSuccess {
				t.Fatalf("create_entities: %+v", r)
			}
			if r := invoke(reg, ctx, "memory__search_nodes", `{"query":"toolsvc"}`); r.Status != registry.StatusSuccess || !strings.Contains(r.Result, "serves tools over HTTP") {
				t.Fatalf("search_nodes: %+v", r)
			}
			if _, err := os.Stat(filepath.Join(e.ws.Dir(), "memory.jsonl")); err != nil {
				t.Errorf("the graph is not in the workspace: %v", err)
			}
		},
		"files": func(t *testing.T, e *env, reg *registry.Registry) {
			if err := os.WriteFile(filepath.Join(e.ws.Dir(), "notes.txt"), []byte("remember the milk"), 0o644); err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(e.ws.Dir(), "notes.txt")
			if r := invoke(reg, ctx, "files__read_text_file", `{"path":"`+in+`"}`); r.Status != registry.StatusSuccess || !strings.Contains(r.Result, "remember the milk") {
				t.Fatalf("read_text_file: %+v", r)
			}
			// The server itself refuses a path outside the folder it was given.
			if r := invoke(reg, ctx, "files__read_text_file", `{"path":"/etc/hostname"}`); r.Status != registry.StatusError {
				t.Errorf("read outside the workspace: %+v", r)
			}
		},
	}
	if len(servers) != len(checks) {
		t.Fatalf("the docs have examples %v; the test checks %d", servers, len(checks))
	}
	for name, raw := range servers {
		t.Run(name, func(t *testing.T) {
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no check for the example %s", name)
			}
			cfg, err := ParseConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, modes[len(modes)-1], home)
			e.deps.Home = home
			// The first run on a machine downloads each package and its
			// dependencies through the sandbox's proxy before the server
			// answers: on a busy machine that outlasts the 20 s the other
			// tests give a start.
			e.deps.ConnectTimeout = 2 * time.Minute
			guard, err := netguard.New(netguard.Options{AllowHosts: []string{"registry.npmjs.org"}})
			if err != nil {
				t.Fatal(err)
			}
			e.deps.Egress.Guard = guard
			s := e.start(t, name, cfg)
			check(t, e, registryOf(t, s))
		})
	}
}
