package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApprovalToolsFileRules: a tools file's tool carries its own
// approval rule, which holds its calls like a policy's; the policy's rule
// for a tool comes before the tool's own; a reload that changes the rule
// takes effect for the next call; a rule that is no rule stops start-up.
func TestApprovalToolsFileRules(t *testing.T) {
	t.Parallel()
	const v1 = `
tools:
  - name: release
    description: Release a version to an environment.
    parameters: {type: object, properties: {env: {type: string}}, required: [env]}
    shell: 'echo "$TOOL_ARG_ENV" >> released.txt; echo "released to $TOOL_ARG_ENV"'
    approval: [{env: "prod*"}]
  - name: purge
    description: Purge the cache.
    shell: 'echo purged >> purged.txt'
    approval: always
`
	file := writeToolsFile(t, v1)
	// The policy lets purge run without asking: its rule comes first.
	pol := writePolicy(t, "approval:\n  purge: never\n")
	s := startServer(t, map[string]string{"TOOLS_FILE": file, "API_KEYS": policyKeys(), "POLICY_FILE": pol, "APPROVER_KEYS": "bob"})
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(s.Workspace, name)); return string(b) }

	// An environment no pattern names runs at once.
	assertContains(t, "release to staging", mustSucceed(t, alice.invoke(t, "release", map[string]any{"env": "staging"})), "released to staging")
	// prod is held, and does not run until bob approves it.
	h := held(t, alice.invoke(t, "release", map[string]any{"env": "production"}))
	assertContains(t, "the held call's summary", h.Summary, "release", "production")
	if strings.Contains(read("released.txt"), "production") {
		t.Fatal("a held call ran")
	}
	if code, body := decide(t, bob, h.ApprovalID, "approve", "release window"); code != 200 {
		t.Fatalf("bob approves: %d %s", code, body)
	}
	mustSucceed(t, alice.invoke(t, "release", map[string]any{"env": "production"}, "X-Approval", h.ApprovalID))
	if got := read("released.txt"); got != "staging\nproduction\n" {
		t.Errorf("released.txt = %q", got)
	}

	// purge says always, the policy never: the policy wins.
	mustSucceed(t, alice.invoke(t, "purge", map[string]any{}))
	if read("purged.txt") != "purged\n" {
		t.Errorf("purge did not run under the policy's never: %q", read("purged.txt"))
	}

	// A reload that makes release always ask holds staging too.
	if err := os.WriteFile(file, []byte(strings.Replace(v1, `approval: [{env: "prod*"}]`, "approval: always", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reloaded"`, 1)
	held(t, alice.invoke(t, "release", map[string]any{"env": "staging"}))
	if got := read("released.txt"); got != "staging\nproduction\n" {
		t.Errorf("after the reload, a held call ran: %q", got)
	}

	// A value that is no rule stops start-up, naming the tool.
	bad := writeToolsFile(t, strings.Replace(v1, "approval: always", "approval: sometimes", 1))
	err := startError(t, map[string]string{"TOOLS_FILE": bad})
	if err == nil {
		t.Fatal("the service started with approval: sometimes")
	}
	assertContains(t, "start-up error", err.Error(), "tools file "+bad, `tool "purge"`, `"sometimes" is no approval rule`)
}

// TestApprovalSummaries: the person deciding reads the built-in tools'
// own words, through GET /approvals as well as in the held result.
func TestApprovalSummaries(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, nil)
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)
	h := held(t, alice.invoke(t, "exec", map[string]any{"command": "git push origin main", "working_dir": "repo", "timeout": 60}))
	if want := `run the command: "git push origin main" (in the folder repo, timeout 60 s)`; h.Summary != want {
		t.Errorf("exec's summary = %q, want %q", h.Summary, want)
	}
	w := held(t, alice.invoke(t, "write_file", map[string]any{"path": "./notes/../deploy/prod.yaml", "content": "replicas: 3\n"}))
	if want := "write 12 bytes to deploy/prod.yaml (given as ./notes/../deploy/prod.yaml), replacing the file if it exists"; w.Summary != want {
		t.Errorf("write_file's summary = %q, want %q", w.Summary, want)
	}
	_, body := bob.do(t, "GET", "/approvals", nil, nil)
	assertContains(t, "GET /approvals", string(body), `"summary":"run the command: \"git push origin main\"`, `"summary":"write 12 bytes to deploy/prod.yaml`)
}

// TestPythonApprovalExample runs examples/python/test_toolsvc_approval.py
// against the real service: the standard-library module that an agent
// framework's approval flow sits on (held, approved with an approver key
// and sent again once, rejected, other arguments refused, no approver
// key, the agent's key refused as an approver).
func TestPythonApprovalExample(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the example: ", err)
	}
	s := startApprovals(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "test_toolsvc_approval.py")
	cmd.Dir = "../../examples/python"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1", "REQUIRE_TOOLSVC=1",
		"TOOLS_URL=" + s.URL, "AGENT_KEY=" + policyAliceKey, "APPROVER_KEY=" + policyBobKey, "APPROVER_NAME=bob"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_toolsvc_approval.py: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("the example's tests were skipped:\n%s", out)
	}
	t.Logf("%s", out)
}
