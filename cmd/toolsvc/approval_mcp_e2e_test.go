package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/npmtest"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
)

// mrtrVersion is the first MCP revision with multi round-trip requests.
const mrtrVersion = "2026-07-28"

var rpcID atomic.Int64

// mcpToolCall sends one tools/call to /mcp as s's key, speaking protocol
// version (with the per-request _meta that 2026-07-28 asks for, and
// client capabilities caps), with extra params (requestState,
// inputResponses) besides name and arguments, and returns the JSON-RPC
// result, failing on a JSON-RPC error.
func mcpToolCall(t *testing.T, s *testServer, version string, caps map[string]any, name string, args any, extra map[string]any) map[string]any {
	t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	for k, v := range extra {
		params[k] = v
	}
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": version}
	if version >= mrtrVersion {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    version,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": caps,
		}
		h["Mcp-Method"], h["Mcp-Name"] = "tools/call", name
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcID.Add(1), "method": "tools/call", "params": params})
	resp, data := s.do(t, "POST", "/mcp", strings.NewReader(string(body)), h)
	var msg struct {
		Result map[string]any  `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &msg) != nil || msg.Result == nil {
		t.Fatalf("tools/call %s over %s: %d %s", name, version, resp.StatusCode, data)
	}
	return msg.Result
}

// resultText is the text of a tools/call result.
func resultText(res map[string]any) string {
	var b strings.Builder
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// heldOverMCP checks that res is a held call's result as a client that is
// not asked gets it (no error, the approval in structuredContent) and
// returns the approval's ID.
func heldOverMCP(t *testing.T, res map[string]any) string {
	t.Helper()
	sc, _ := res["structuredContent"].(map[string]any)
	id, _ := sc["approval_id"].(string)
	if res["isError"] == true || res["resultType"] == "input_required" || id == "" || sc["status"] != "approval_required" ||
		len(sc["arguments_sha256"].(string)) != 64 || sc["summary"] == "" || sc["expires_at"] == "" {
		t.Fatalf("want a held call's result, got %v", res)
	}
	assertContains(t, "the held call's text", resultText(res), "waits for a person's approval", "has not run", id)
	return id
}

// asked checks that res puts the approval question to the client and
// returns the form's message and the requestState.
func asked(t *testing.T, res map[string]any) (message, state string) {
	t.Helper()
	reqs, _ := res["inputRequests"].(map[string]any)
	q, _ := reqs["approval"].(map[string]any)
	params, _ := q["params"].(map[string]any)
	state, _ = res["requestState"].(string)
	if res["resultType"] != "input_required" || q["method"] != "elicitation/create" || params["mode"] != "form" || state == "" || res["content"] != nil && len(res["content"].([]any)) > 0 {
		t.Fatalf("want an input_required result asking for approval, got %v", res)
	}
	schema, _ := params["requestedSchema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	if _, ok := props["approve"]; !ok {
		t.Fatalf("the form asks no approve: %v", schema)
	}
	message, _ = params["message"].(string)
	return message, state
}

func answer(state, action string, content map[string]any) map[string]any {
	ans := map[string]any{"action": action}
	if content != nil {
		ans["content"] = content
	}
	return map[string]any{"requestState": state, "inputResponses": map[string]any{"approval": ans}}
}

// forms are the client capabilities of a client that takes forms.
var forms = map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}

// TestApprovalMCP walks held calls through /mcp: a client of 2026-07-28
// that takes forms is asked and its answer decides (when its key may
// decide its own calls); older clients get what REST gives and send the
// call again; no requestState but the one given, for the call it was
// given for, by the key it was given to, is taken.
func TestApprovalMCP(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, nil)
	alice, bob, carol := s.asKey(policyAliceKey), s.asKey(policyBobKey), s.asKey(policyCarolKey)
	ran := func(name string) string { b, _ := os.ReadFile(filepath.Join(s.Workspace, name)); return string(b) }

	t.Run("older revisions: held, decided over REST, sent again", func(t *testing.T) {
		cmd := map[string]any{"command": "echo legacy >> legacy.txt"}
		// The fast path (a plain call) and the SDK (a call with _meta)
		// answer alike.
		id := heldOverMCP(t, mcpToolCall(t, alice, "2025-06-18", nil, "exec", cmd, nil))
		if again := heldOverMCP(t, mcpToolCall(t, alice, "2025-11-25", nil, "exec", cmd, map[string]any{"_meta": map[string]any{"progressToken": 1}})); again != id {
			t.Errorf("the same call through the SDK got approval %s, want %s", again, id)
		}
		if ran("legacy.txt") != "" {
			t.Fatal("a held call ran")
		}
		if code, body := decide(t, bob, id, "approve", "fine"); code != 200 {
			t.Fatalf("bob approves: %d %s", code, body)
		}
		res := mcpToolCall(t, alice, "2025-06-18", nil, "exec", cmd, nil)
		if res["isError"] == true || res["structuredContent"] != nil {
			t.Fatalf("the approved call sent again: %v", res)
		}
		if ran("legacy.txt") != "legacy\n" {
			t.Fatalf("legacy.txt = %q", ran("legacy.txt"))
		}
		// A 2026-07-28 client that takes no forms is not asked.
		heldOverMCP(t, mcpToolCall(t, carol, mrtrVersion, map[string]any{}, "exec", map[string]any{"command": "true"}, nil))
	})

	t.Run("asked and approved", func(t *testing.T) {
		cmd := map[string]any{"command": "echo asked >> asked.txt"}
		msg, state := asked(t, mcpToolCall(t, carol, mrtrVersion, forms, "exec", cmd, nil))
		assertContains(t, "the question", msg, "echo asked >> asked.txt", "Arguments SHA-256: ", "open until ", "Tool: exec")
		if ran("asked.txt") != "" {
			t.Fatal("a held call ran before it was approved")
		}
		// Refused: not the state given, not for this key, not this call.
		for name, c := range map[string]struct {
			as    *testServer
			args  any
			state string
			want  []string
		}{
			"forged":          {carol, cmd, "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", []string{"not one this service gave", "Next: send the call again without requestState"}},
			"truncated":       {carol, cmd, state[:len(state)-3], []string{"not one this service gave"}},
			"changed":         {carol, cmd, state[:len(state)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(state, "AA")], []string{"not one this service gave"}},
			"other key":       {bob, cmd, state, []string{"another key's call"}},
			"other arguments": {carol, map[string]any{"command": "echo evil >> asked.txt"}, state, []string{"an answer decides only the call it was asked about", "Next: send exactly the arguments"}},
		} {
			res := mcpToolCall(t, c.as, mrtrVersion, forms, "exec", c.args, answer(c.state, "accept", map[string]any{"approve": true}))
			if res["isError"] != true {
				t.Errorf("%s: want a tool error, got %v", name, res)
			}
			assertContains(t, name, resultText(res), c.want...)
		}
		if ran("asked.txt") != "" {
			t.Fatal("a refused requestState ran the call")
		}
		// The answer missing: asked again.
		if _, again := asked(t, mcpToolCall(t, carol, mrtrVersion, forms, "exec", cmd, map[string]any{"requestState": state})); again == "" {
			t.Fatal("no requestState asking again")
		}
		// Approved: runs, once.
		res := mcpToolCall(t, carol, mrtrVersion, forms, "exec", cmd, answer(state, "accept", map[string]any{"approve": true}))
		if res["isError"] == true || res["resultType"] == "input_required" {
			t.Fatalf("the approved call: %v", res)
		}
		if ran("asked.txt") != "asked\n" {
			t.Fatalf("asked.txt = %q", ran("asked.txt"))
		}
		// Replayed: the approval has run its call.
		res = mcpToolCall(t, carol, mrtrVersion, forms, "exec", cmd, answer(state, "accept", map[string]any{"approve": true}))
		assertContains(t, "the answer replayed", resultText(res), "already run its call")
		if ran("asked.txt") != "asked\n" {
			t.Fatalf("a replayed requestState ran the call again: %q", ran("asked.txt"))
		}
	})

	t.Run("asked and rejected", func(t *testing.T) {
		args := map[string]any{"path": "deploy/prod.yaml", "content": "x"}
		_, state := asked(t, mcpToolCall(t, carol, mrtrVersion, forms, "write_file", args, nil))
		res := mcpToolCall(t, carol, mrtrVersion, forms, "write_file", args, answer(state, "accept", map[string]any{"approve": false, "reason": "no deploys on Fridays"}))
		if res["isError"] != true {
			t.Fatalf("the rejected call: %v", res)
		}
		assertContains(t, "the rejected call", resultText(res), "rejected", "no deploys on Fridays", "carol")
		if _, err := os.Stat(filepath.Join(s.Workspace, "deploy/prod.yaml")); err == nil {
			t.Error("a rejected write ran")
		}
		// Declined and dismissed.
		_, state = asked(t, mcpToolCall(t, carol, mrtrVersion, forms, "exec", map[string]any{"command": "echo declined"}, nil))
		assertContains(t, "declined", resultText(mcpToolCall(t, carol, mrtrVersion, forms, "exec", map[string]any{"command": "echo declined"}, answer(state, "decline", nil))), "declined when asked")
		_, state = asked(t, mcpToolCall(t, carol, mrtrVersion, forms, "exec", map[string]any{"command": "echo dismissed"}, nil))
		res = mcpToolCall(t, carol, mrtrVersion, forms, "exec", map[string]any{"command": "echo dismissed"}, answer(state, "cancel", nil))
		heldOverMCP(t, res)
		assertContains(t, "dismissed", resultText(res), "dismissed the question without deciding")
	})

	t.Run("a key that may not decide its own calls is not asked", func(t *testing.T) {
		// alice is no approver; bob is one without self_approve.
		for _, k := range []*testServer{alice, bob} {
			res := mcpToolCall(t, k, mrtrVersion, forms, "exec", map[string]any{"command": "echo waits"}, nil)
			id := heldOverMCP(t, res)
			assertContains(t, "the held call's text", resultText(res), "may not approve its own calls", "/approvals")
			if k == alice {
				if code, body := decide(t, bob, id, "approve", ""); code != 200 {
					t.Fatalf("bob approves: %d %s", code, body)
				}
				res := mcpToolCall(t, alice, mrtrVersion, forms, "exec", map[string]any{"command": "echo waits"}, nil)
				assertContains(t, "alice's call once approved", resultText(res), "waits")
				if res["isError"] == true || res["structuredContent"] != nil {
					t.Errorf("alice's call once approved: %v", res)
				}
			}
		}
	})
}

// TestApprovalMCPSealKey: with TOOLSVC_APPROVAL_SEAL_KEY, a question asked
// by one process is answered to another holding the same key (here the
// same service restarted on its data folder, as a replica would be on a
// shared database); a process with another key refuses the answer.
func TestApprovalMCPSealKey(t *testing.T) {
	t.Parallel()
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
	first := startApprovals(t, map[string]string{"APPROVAL_SEAL_KEY": key})
	cmd := map[string]any{"command": "echo sealed >> sealed.txt"}
	_, state := asked(t, mcpToolCall(t, first.asKey(policyCarolKey), mrtrVersion, forms, "exec", cmd, nil))
	first.Stop(t)

	other := startApprovals(t, map[string]string{"DATA_DIR": first.DataDir, "WORKSPACE": first.Workspace,
		"APPROVAL_SEAL_KEY": "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="})
	res := mcpToolCall(t, other.asKey(policyCarolKey), mrtrVersion, forms, "exec", cmd, answer(state, "accept", map[string]any{"approve": true}))
	assertContains(t, "another seal key", resultText(res), "sealed with another key")
	other.Stop(t)

	same := startApprovals(t, map[string]string{"DATA_DIR": first.DataDir, "WORKSPACE": first.Workspace, "APPROVAL_SEAL_KEY": key})
	res = mcpToolCall(t, same.asKey(policyCarolKey), mrtrVersion, forms, "exec", cmd, answer(state, "accept", map[string]any{"approve": true}))
	if res["isError"] == true {
		t.Fatalf("the same seal key: %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(first.Workspace, "sealed.txt")); string(b) != "sealed\n" {
		t.Fatalf("sealed.txt = %q", b)
	}
}

// TestApprovalMCPReplicas: two replicas on one database with one seal
// key: the question asked by one is answered to the other, which runs
// the call.
func TestApprovalMCPReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDatabase(t)
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	a := startApprovals(t, map[string]string{"DATABASE_URL": db, "APPROVAL_SEAL_KEY": key})
	b := startApprovals(t, map[string]string{"DATABASE_URL": db, "APPROVAL_SEAL_KEY": key, "WORKSPACE": a.Workspace}, asProcess())
	cmd := map[string]any{"command": "echo replica >> replica.txt"}
	_, state := asked(t, mcpToolCall(t, a.asKey(policyCarolKey), mrtrVersion, forms, "exec", cmd, nil))
	res := mcpToolCall(t, b.asKey(policyCarolKey), mrtrVersion, forms, "exec", cmd, answer(state, "accept", map[string]any{"approve": true}))
	if res["isError"] == true {
		t.Fatalf("answered to the other replica: %v", res)
	}
	if data, _ := os.ReadFile(filepath.Join(a.Workspace, "replica.txt")); string(data) != "replica\n" {
		t.Fatalf("replica.txt = %q", data)
	}
	// Replayed to the first replica: the approval has run its call.
	res = mcpToolCall(t, a.asKey(policyCarolKey), mrtrVersion, forms, "exec", cmd, answer(state, "accept", map[string]any{"approve": true}))
	assertContains(t, "replayed to the other replica", resultText(res), "already run its call")
}

// tsClientPackage is the official TypeScript MCP client, v2: the first
// line of it that speaks 2026-07-28 and its multi round-trip requests
// (@modelcontextprotocol/sdk, v1 up to 1.32.2, speaks 2025-11-25 at
// most).
const tsClientPackage = "@modelcontextprotocol/client@2.4.0"

// TestApprovalMCPTypeScriptClient runs the official TypeScript client
// from npm against /mcp, as carol (who may approve her own calls): pinned
// to 2026-07-28, it is asked about each held call, its handler's answers
// decide them, and one call runs and the other comes back rejected, in
// one callTool each; on the 2025 handshake it is asked nothing and gets
// the held result.
func TestApprovalMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	nm := npmtest.Install(t, tsClientPackage)
	dir := nodeScript(t, nm, "approval_mcp_client.mjs")
	s := startApprovals(t, nil)
	type output struct {
		Era   *string
		Asked []struct {
			Message string
			Schema  map[string]any
		}
		Results map[string]map[string]any
	}
	run := func(t *testing.T, mode string) output {
		t.Helper()
		out, err := exec.Command("node", filepath.Join(dir, "run.mjs"), s.URL+"/mcp", policyCarolKey, mode).CombinedOutput()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		var o output
		if err := json.Unmarshal(out, &o); err != nil {
			t.Fatalf("output: %v\n%s", err, out)
		}
		return o
	}
	approved, rejected := "echo approved >> approved.txt", "echo rejected >> rejected.txt"

	t.Run(mrtrVersion, func(t *testing.T) {
		o := run(t, mrtrVersion)
		if o.Era == nil || *o.Era != mrtrVersion {
			t.Errorf("negotiated %v, want %s", o.Era, mrtrVersion)
		}
		if len(o.Asked) != 2 {
			t.Fatalf("the client was asked %d questions, want 2: %+v", len(o.Asked), o)
		}
		assertContains(t, "the first question", o.Asked[0].Message, approved, "Arguments SHA-256: ", "open until")
		res := o.Results[approved]
		if res["isError"] == true || res["thrown"] != nil {
			t.Fatalf("the approved call: %v", res)
		}
		if b, _ := os.ReadFile(filepath.Join(s.Workspace, "approved.txt")); string(b) != "approved\n" {
			t.Fatalf("approved.txt = %q", b)
		}
		res = o.Results[rejected]
		if res["isError"] != true {
			t.Fatalf("the rejected call: %v", res)
		}
		assertContains(t, "the rejected call", resultText(res), "rejected", "not this one, says the e2e user")
		if _, err := os.Stat(filepath.Join(s.Workspace, "rejected.txt")); err == nil {
			t.Error("the rejected call ran")
		}
	})

	t.Run("legacy", func(t *testing.T) {
		o := run(t, "legacy")
		if len(o.Asked) != 0 {
			t.Errorf("a 2025 client was asked: %+v", o.Asked)
		}
		// approved.txt's call was approved and run above: this one is a
		// new call of the same arguments, held anew; the rejected one is
		// still rejected.
		heldOverMCP(t, o.Results[approved])
		assertContains(t, "the rejected call again", resultText(o.Results[rejected]), "rejected", "not this one")
	})
}
