package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

const (
	policyAliceKey = "alice-policy-key-0123456789abcdef"
	policyBobKey   = "bob-policy-key-0123456789abcdef"
	policyCarolKey = "carol-policy-key-0123456789abcdef"
)

// policyKeys is TOOLSVC_API_KEYS of the policy tests: alice, bob, carol.
func policyKeys() string {
	return "alice=" + policyAliceKey + ",bob=" + policyBobKey + ",carol=" + policyCarolKey
}

// writePolicy writes a policy file where only its owner can write it.
func writePolicy(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// asKey returns a copy of s whose helpers send key.
func (s *testServer) asKey(key string) *testServer {
	return &testServer{URL: s.URL, Workspace: s.Workspace, DataDir: s.DataDir, Key: key, logs: s.logs}
}

// mcpHeaders are the headers of a plain MCP request; the fast path takes
// a plain tools/call, one with _meta goes to the SDK.
var mcpHeaders = map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}

// listed returns the tool names each listing door shows the key of s.
func (s *testServer) listed(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	names := func(door string, body []byte, path ...string) {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v: %.200s", door, err, body)
		}
		for _, p := range path {
			if a, ok := v.([]any); ok && p == "0" && len(a) > 0 {
				v = a[0]
				continue
			}
			v = v.(map[string]any)[p]
		}
		for _, d := range v.([]any) {
			m := d.(map[string]any)
			if f, ok := m["function"].(map[string]any); ok {
				m = f
			}
			out[door] = append(out[door], m["name"].(string))
		}
	}
	for _, q := range []string{"", "?format=responses", "?format=anthropic", "?strict=true", "?format=responses&strict=true"} {
		_, body := s.do(t, "GET", "/tools"+q, nil, nil)
		names("GET /tools"+q, body)
	}
	_, body := s.do(t, "GET", "/tools?format=gemini", nil, nil)
	names("GET /tools?format=gemini", body, "0", "functionDeclarations")
	for _, q := range []string{"", "?scope=tools"} {
		_, body := s.do(t, "GET", "/openapi.json"+q, nil, nil)
		var doc struct{ Paths map[string]any }
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		door := "GET /openapi.json" + q
		out[door] = []string{}
		for p := range doc.Paths {
			if name, ok := strings.CutSuffix(strings.TrimPrefix(p, "/tools/"), "/invoke"); ok && name != "{name}" {
				out[door] = append(out[door], name)
			}
		}
	}
	_, body = s.do(t, "POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), mcpHeaders)
	names("MCP tools/list", body, "result", "tools")
	for door, n := range out {
		slices.Sort(n)
		out[door] = n
	}
	return out
}

// callable reports, door by door, whether the key of s may call tool:
// arguments that are no object reach the registry's checks, so a tool
// that may be called answers with an error result and runs nothing, and
// one that may not answers as an unknown tool.
func (s *testServer) callable(t *testing.T, tool string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	resp, _ := s.do(t, "GET", "/tools/"+tool, nil, nil)
	out["GET /tools/{name}"] = resp.StatusCode == 200
	resp, body := s.do(t, "POST", "/tools/"+tool+"/invoke", strings.NewReader(`[1]`), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 200 && (resp.StatusCode != 404 || !strings.Contains(string(body), `"unknown_tool"`)) {
		t.Errorf("invoke %s: %d %s", tool, resp.StatusCode, body)
	}
	out["POST /tools/{name}/invoke"] = resp.StatusCode == 200
	for door, meta := range map[string]string{"MCP tools/call (fast path)": "", "MCP tools/call (SDK)": `,"_meta":{"progressToken":1}`} {
		_, body = s.do(t, "POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":[1]`+meta+`}}`), mcpHeaders)
		unknown := strings.Contains(string(body), `"code":-32602`) && strings.Contains(string(body), "unknown tool")
		if !unknown && !strings.Contains(string(body), `"result"`) {
			t.Errorf("%s %s: %s", door, tool, body)
		}
		out[door] = !unknown
	}
	return out
}

// TestPolicyListedIffCallable walks three keys, every tool and every door:
// each door lists a key exactly the tools it may call, and calls exactly
// those; the others answer as unknown tools. bob (read_file only) sees and
// calls nothing else; alice, whom the file does not list, sees every tool.
// The sub-agents a key starts are shown only its tools too.
func TestPolicyListedIffCallable(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	offered := map[string][]string{} // sub-agent task -> the tools its model was shown
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		msgs := chatMessages(t, r)
		task := msgs[len(msgs)-1].Content
		mu.Lock()
		offered[task] = r.ToolNames()
		mu.Unlock()
		return agenttest.Final("done: " + task)
	})
	file := writePolicy(t, `
keys:
  bob:   {tools: {allow: [read_file]}}
  carol: {tools: {allow: [files, web, spawn], deny: [write_file]}}
`)
	s := startServer(t, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file, "LLM_BASE_URL": llm.URL, "LLM_MODEL": "fake"})
	alice, bob, carol := s.asKey(policyAliceKey), s.asKey(policyBobKey), s.asKey(policyCarolKey)

	all := alice.listed(t)["GET /tools"]
	if len(all) < 8 || !slices.Contains(all, "exec") || !slices.Contains(all, "spawn") {
		t.Fatalf("alice sees %v, want every tool", all)
	}
	carolSets := []string{"read_file", "edit_file", "list_dir", "file_search", "web_fetch", "screenshot", "spawn"}
	want := map[string]func(tool string) bool{
		"alice": func(string) bool { return true },
		"bob":   func(tool string) bool { return tool == "read_file" },
		"carol": func(tool string) bool { return slices.Contains(carolSets, tool) },
	}
	mismatches, checked := 0, 0
	for _, k := range []struct {
		name string
		s    *testServer
	}{{"alice", alice}, {"bob", bob}, {"carol", carol}} {
		var wantListed []string
		for _, tool := range all {
			if want[k.name](tool) {
				wantListed = append(wantListed, tool)
			}
		}
		for door, got := range k.s.listed(t) {
			checked++
			if !slices.Equal(got, wantListed) {
				mismatches++
				t.Errorf("%s: %s lists %v, want %v", k.name, door, got, wantListed)
			}
		}
		for _, tool := range all {
			for door, ok := range k.s.callable(t, tool) {
				checked++
				if ok != want[k.name](tool) {
					mismatches++
					t.Errorf("%s: %s of %s: callable %v, want %v", k.name, door, tool, ok, !ok)
				}
			}
		}
	}
	// The sub-agents of alice and carol are shown the sub-agents' tools
	// their key may call; bob may not start one (spawn is not his).
	mustSucceed(t, alice.invoke(t, "spawn", map[string]any{"task": "alice's task", "wait": true}))
	mustSucceed(t, carol.invoke(t, "spawn", map[string]any{"task": "carol's task", "wait": true}))
	mu.Lock()
	aliceSub, carolSub := offered["alice's task"], offered["carol's task"]
	mu.Unlock()
	checked += 2
	if !slices.Contains(aliceSub, "exec") || !slices.Contains(aliceSub, "write_file") {
		mismatches++
		t.Errorf("alice's sub-agent was shown %v, want exec and write_file among them", aliceSub)
	}
	for _, tool := range carolSub {
		if !want["carol"](tool) {
			mismatches++
			t.Errorf("carol's sub-agent was shown %s, which carol may not call (shown %v)", tool, carolSub)
		}
	}
	if !slices.Contains(carolSub, "read_file") {
		t.Errorf("carol's sub-agent was shown %v, want read_file among them", carolSub)
	}
	t.Logf("3 keys x %d tools x every door: %d checks, %d mismatches", len(all), checked, mismatches)
}

// TestPolicyRate: carol (60 a minute, burst 5) sends 20 calls at once and
// gets the burst through, give or take a token that refills meanwhile,
// and 429 with Retry-After for the rest, while alice, with no rate, is
// not slowed; carol's MCP call over the rate is a JSON-RPC error with the
// wait, and the refusals are counted and audited with the key's name.
func TestPolicyRate(t *testing.T) {
	t.Parallel()
	file := writePolicy(t, `
keys:
  carol: {rate: {per_minute: 60, burst: 5}}
`)
	s := startServer(t, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file})
	alice, carol := s.asKey(policyAliceKey), s.asKey(policyCarolKey)
	s.writeWS(t, "a.txt", "hello\n")
	var wg sync.WaitGroup
	codes := make([]int, 20)
	retry := make([]string, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := carol.do(t, "POST", "/tools/read_file/invoke", strings.NewReader(`{"path":"a.txt"}`), map[string]string{"Content-Type": "application/json"})
			codes[i], retry[i] = resp.StatusCode, resp.Header.Get("Retry-After")
		}()
	}
	wg.Wait()
	ok, limited := 0, 0
	for i, c := range codes {
		switch c {
		case 200:
			ok++
		case 429:
			limited++
			if retry[i] == "" || strings.ContainsAny(retry[i], ".s") {
				t.Errorf("429 with Retry-After %q, want whole seconds", retry[i])
			}
		default:
			t.Errorf("carol's call: HTTP %d", c)
		}
	}
	if ok < 5 || ok > 7 || ok+limited != 20 {
		t.Errorf("carol's burst of 20: %d passed, %d got 429; want 5 to 7 to pass and the rest 429", ok, limited)
	}
	// Right after her burst (her bucket refills one call a second).
	_, body := carol.do(t, "POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt"}}}`), mcpHeaders)
	if !strings.Contains(string(body), `"error":{"code":-32029`) || !strings.Contains(string(body), `"retry_after":`) {
		t.Errorf("carol's MCP call over the rate: %s", body)
	}
	// alice has no rate: none of her calls is refused.
	for range 30 {
		mustSucceed(t, alice.invoke(t, "read_file", map[string]string{"path": "a.txt"}))
	}
	_, metrics := alice.do(t, "GET", "/metrics", nil, nil)
	if !strings.Contains(string(metrics), `toolsvc_calls_refused_total{key="carol",reason="rate"}`) {
		t.Errorf("metrics lack carol's refusals")
	}
	records := waitAuditRecords(t, s, func(recs []map[string]any) bool {
		n := 0
		for _, r := range recs {
			if r["decision"] == "rate_limited" && r["key"] == "carol" {
				n++
			}
		}
		return n >= limited
	})
	for _, r := range records {
		if r["decision"] != nil && (r["key"] != "carol" || r["error_code"] != "rate_limited") {
			t.Errorf("refusal record %v", r)
		}
	}
}

// TestPolicyConcurrency: a key at its max_concurrent gets 429 with the
// reason, and the audit record of a denied tool names the key.
func TestPolicyConcurrencyAndDenied(t *testing.T) {
	t.Parallel()
	file := writePolicy(t, `
keys:
  bob:   {tools: {deny: [exec]}}
  carol: {max_concurrent: 1}
`)
	s := startServer(t, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file})
	bob, carol := s.asKey(policyBobKey), s.asKey(policyCarolKey)
	// carol's command runs until the test lets it end, so that her
	// second call surely comes while it runs, however slow the machine.
	done := make(chan string, 1)
	go func() {
		_, body := carol.do(t, "POST", "/tools/exec/invoke", strings.NewReader(`{"command":"touch started; until [ -e release ]; do sleep 0.05; done","timeout":120}`), map[string]string{"Content-Type": "application/json"})
		done <- string(body)
	}()
	// Her second call comes once the command runs: one sent before would
	// take the one place itself and leave the command refused.
	waitFor(t, "carol's command to start", func() bool {
		select {
		case out := <-done:
			t.Fatalf("carol's command ended before it started: %s", out)
		default:
		}
		_, err := os.Stat(filepath.Join(s.Workspace, "started"))
		return err == nil
	})
	deadline := time.Now().Add(waitGuard)
	for refused := false; !refused; {
		resp, body := carol.do(t, "POST", "/tools/list_dir/invoke", strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
		if refused = resp.StatusCode == 429; refused {
			if !strings.Contains(string(body), "at once") || resp.Header.Get("Retry-After") != "1" {
				t.Errorf("over max_concurrent: %s, Retry-After %q", body, resp.Header.Get("Retry-After"))
			}
			continue
		}
		select {
		case out := <-done:
			t.Fatalf("carol's command ended before her second call was refused: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("carol's second call at once was never refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.writeWS(t, "release", "")
	<-done
	resp, body := bob.do(t, "POST", "/tools/exec/invoke", strings.NewReader(`{"command":"echo hi"}`), map[string]string{"Content-Type": "application/json"})
	_, unknown := bob.do(t, "POST", "/tools/no_such_tool/invoke", strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 404 || strings.ReplaceAll(string(body), "exec", "X") != strings.ReplaceAll(string(unknown), "no_such_tool", "X") {
		t.Errorf("bob's exec: %d %s, want what an unknown tool gets: %s", resp.StatusCode, body, unknown)
	}
	// The MCP door records its refusals too: a plain tools/call (the
	// fast path) and one with _meta, which the SDK answers.
	for _, params := range []string{`"name":"exec","arguments":{"command":"echo 1"}`, `"name":"exec","arguments":{"command":"echo 2"},"_meta":{"progressToken":"p"}`} {
		_, body := bob.do(t, "POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+params+`}}`), mcpHeaders)
		if !strings.Contains(string(body), `unknown tool \"exec\"`) {
			t.Errorf("bob's MCP exec: %s", body)
		}
	}
	waitAuditRecords(t, s, func(recs []map[string]any) bool {
		n := 0
		for _, r := range recs {
			if r["decision"] == "denied" && r["key"] == "bob" && r["tool_name"] == "exec" {
				n++
			}
		}
		return n == 3
	})
}

// TestPolicyFileRefused: a policy naming what the service does not have,
// a planned field, or a policy without keys stops start-up with why.
func TestPolicyFileRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, keys, file, want string
		env                    map[string]string
	}{
		{"unknown key", policyKeys(), `keys: {carl: {}}`, `no key is named "carl" (did you mean "carol"?)`, nil},
		{"unknown tool", policyKeys(), `keys: {bob: {tools: {allow: [read_fiel]}}}`, `(did you mean "read_file"?)`, nil},
		{"folder outside", policyKeys(), `keys: {bob: {workspace: ../bob}}`, `keys.bob.workspace: "../bob" gives "../bob" for key "bob", which is not a folder inside TOOLSVC_WORKSPACE`, nil},
		{"folders nested", policyKeys(), `{default: {workspace: "t/{key}"}, keys: {carol: {workspace: t}}}`, `holds key "alice"'s folder "t/alice"`, nil},
		{"folder unconfined", policyKeys(), `default: {workspace: "t/{key}"}`, "a key cannot have a folder of its own here: exec's sandbox is none", map[string]string{"EXEC_SANDBOX": "none"}},
		{"no keys", "", `default: {max_concurrent: 2}`, "TOOLSVC_POLICY_FILE", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"POLICY_FILE": writePolicy(t, c.file)}
			for k, v := range c.env {
				env[k] = v
			}
			if c.keys != "" {
				env["API_KEYS"] = c.keys
			}
			err := startError(t, env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("start-up error %v, want it to say %q", err, c.want)
			}
		})
	}
}

// waitAuditRecords reads the audit records of s until ok holds of them.
func waitAuditRecords(t *testing.T, s *testServer, ok func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(waitGuard)
	for {
		var recs []map[string]any
		_ = filepath.WalkDir(filepath.Join(s.DataDir, "audit_logs"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			var r map[string]any
			if json.Unmarshal(data, &r) == nil {
				recs = append(recs, r)
			}
			return nil
		})
		if ok(recs) {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit records never held what was wanted: %s", fmt.Sprint(recs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPolicyReload: SIGHUP reads the policy again together with the tools
// file, and checks it against the tools the file now has (a toolset the
// new file adds may be named); a policy with a mistake keeps the one in
// force, and the log says why.
func TestPolicyReload(t *testing.T) {
	t.Parallel()
	tools := filepath.Join(t.TempDir(), "tools.yaml")
	write := func(f, text string) {
		t.Helper()
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tools, "tools:\n  - name: greet\n    description: says hi\n    toolset: mine\n    shell: 'echo hi'\n")
	pol := writePolicy(t, "keys:\n  bob: {tools: {allow: [read_file]}}\n")
	s := startServer(t, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": pol, "TOOLS_FILE": tools})
	bob := s.asKey(policyBobKey)
	sees := func(want ...string) {
		t.Helper()
		if got := bob.listed(t)["GET /tools"]; !slices.Equal(got, want) {
			t.Errorf("bob sees %v, want %v", got, want)
		}
	}
	sees("read_file")

	// One reload: the tools file adds a toolset, the policy names it.
	write(tools, "tools:\n  - name: greet\n    description: says hi\n    toolset: mine\n    shell: 'echo hi'\n"+
		"  - name: wave\n    description: waves\n    toolset: extra\n    shell: 'echo wave'\n")
	write(pol, "keys:\n  bob: {tools: {allow: [read_file, extra]}}\n")
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"policy file reloaded"`, 1)
	sees("read_file", "wave")
	if out := mustSucceed(t, bob.invoke(t, "wave", "{}")); out != "wave\n" {
		t.Errorf("wave = %q", out)
	}

	// A mistake: the policy in force stays, and the log says why.
	write(pol, "keys:\n  bobby: {tools: {allow: [greet]}}\n")
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"policy file reload failed; the policy in force is kept"`, 1)
	assertContains(t, "log", s.Logs(), `no key is named \"bobby\" (did you mean \"bob\"?)`)
	sees("read_file", "wave")
	resp, _ := bob.do(t, "POST", "/tools/greet/invoke", strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 404 {
		t.Errorf("bob's greet after a failed reload: HTTP %d, want 404", resp.StatusCode)
	}
}

// TestPolicySubagents: through the real server, a key's subagents bounds
// hold for it alone: alice (max_running 1) has her second sub-agent at once
// refused with a result that says what to do, while bob starts two; and
// alice's sub-agent stops after her max_turns of 2 where the service's
// bound is 25, and after 3 once a reload says 3.
func TestPolicySubagents(t *testing.T) {
	t.Parallel()
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		msgs := chatMessages(t, r)
		if len(msgs) > 1 && msgs[1].Content == "think hard" {
			return agenttest.Response{Hang: true}
		}
		// Never a final answer: a new folder each turn, so that only a
		// bound on turns ends it.
		return agenttest.Call(fmt.Sprintf("c%d", len(msgs)), "list_dir", fmt.Sprintf(`{"path":"%s"}`, strings.Repeat("./", len(msgs))))
	})
	file := writePolicy(t, `
keys:
  alice: {subagents: {max_running: 1, max_turns: 2}}
`)
	s := startServer(t, llmEnv(llm.URL, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file, "AGENT_MAX_CONCURRENT": "4"}))
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)

	first := agentID.FindString(mustSucceed(t, alice.invoke(t, "spawn", map[string]any{"task": "think hard"})))
	res := alice.invoke(t, "spawn", map[string]any{"task": "think hard"})
	if res.Status == "success" || res.Error == nil || res.Error.Code != "busy" || !strings.Contains(res.Result, "1 of your sub-agents are running") || !strings.Contains(res.Result, "DELETE /agents/") {
		t.Errorf("alice's second sub-agent at once: %+v", res)
	}
	for range 2 {
		mustSucceed(t, bob.invoke(t, "spawn", map[string]any{"task": "think hard"}))
	}
	if resp, body := alice.do(t, "DELETE", "/agents/"+first, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("DELETE /agents/%s: %d %s", first, resp.StatusCode, body)
	}

	// Her slot free again, her next sub-agent runs, for 2 turns only.
	res = alice.invoke(t, "spawn", map[string]any{"task": "list folders", "wait": true})
	id := agentID.FindString(res.Result)
	if res.Status == "success" || id == "" || !strings.Contains(res.Result, "after 2 turns") || !strings.Contains(res.Result, "subagents.max_turns") {
		t.Fatalf("alice's looping sub-agent: %+v", res)
	}
	if got := alice.agentTask(t, id); got.Turns != 2 || got.Error == nil || got.Error.Code != "max_turns" || got.CallCount != 2 {
		t.Errorf("alice's task: %+v", got)
	}

	// A reload bounds the sub-agents started after it.
	if err := os.WriteFile(file, []byte(`keys: {alice: {subagents: {max_turns: 3}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"policy file reloaded"`, 1)
	res = alice.invoke(t, "spawn", map[string]any{"task": "list folders", "wait": true})
	if !strings.Contains(res.Result, "after 3 turns") {
		t.Errorf("alice's sub-agent after the reload: %+v", res)
	}
}
