package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
	"github.com/countbot/toolsvc/internal/registry"
)

// approvalPolicy holds every exec call and write_file calls under deploy/
// for a person; bob decides (TOOLSVC_APPROVER_KEYS), carol may approve her
// own calls.
const approvalPolicy = `
approval:
  exec: always
  write_file: [{path: "deploy/*"}]
keys:
  carol: {self_approve: true}
`

func startApprovals(t *testing.T, env map[string]string, opts ...startOption) *testServer {
	t.Helper()
	vars := map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": writePolicy(t, approvalPolicy), "APPROVER_KEYS": "bob,carol"}
	for k, v := range env {
		vars[k] = v
	}
	return startServer(t, vars, opts...)
}

// held checks that res is held for approval and returns it.
func held(t *testing.T, res registry.Result) registry.Result {
	t.Helper()
	if res.Status != registry.StatusApprovalRequired || res.ApprovalID == "" || len(res.ArgumentsSHA256) != 64 || res.Summary == "" || res.ExpiresAt == nil {
		t.Fatalf("%s: want a call held for approval, got %+v", res.Tool, res)
	}
	return res
}

// decide posts a decision as s's key and returns the HTTP status and body.
func decide(t *testing.T, s *testServer, id, decision, reason string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"decision": decision, "reason": reason})
	resp, data := s.do(t, "POST", "/approvals/"+id, strings.NewReader(string(body)), map[string]string{"Content-Type": "application/json"})
	return resp.StatusCode, string(data)
}

// auditApprovals returns the approval member of every audit record.
func auditApprovals(t *testing.T, s *testServer) []map[string]any {
	t.Helper()
	var out []map[string]any
	_ = filepath.WalkDir(filepath.Join(s.DataDir, "audit_logs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		data, _ := os.ReadFile(p)
		var rec map[string]any
		if json.Unmarshal(data, &rec) == nil {
			if ap, ok := rec["approval"].(map[string]any); ok {
				ap["record_status"], ap["key"], ap["call_id"] = rec["status"], rec["key"], rec["call_id"]
				out = append(out, ap)
			}
		}
		return nil
	})
	return out
}

// TestApprovalREST walks a held call through REST as an agent backend
// and an approver would, and tries every way around the hold: no held
// call runs without a valid approval.
func TestApprovalREST(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, nil)
	alice, bob, carol := s.asKey(policyAliceKey), s.asKey(policyBobKey), s.asKey(policyCarolKey)
	cmd := map[string]any{"command": "echo ran >> ran.txt", "timeout": 30}
	ran := func() string { b, _ := os.ReadFile(filepath.Join(s.Workspace, "ran.txt")); return string(b) }

	h := held(t, alice.invoke(t, "exec", cmd))
	assertContains(t, "the held call's summary", h.Summary, "echo ran >> ran.txt")
	assertContains(t, "the held call's text", h.Result, "waits for a person's approval", h.ApprovalID)
	if ran() != "" {
		t.Fatal("a held call ran")
	}
	// Sent again before a decision: the same approval, still held.
	if again := held(t, alice.invoke(t, "exec", cmd)); again.ApprovalID != h.ApprovalID {
		t.Errorf("the same call sent again got approval %s, want %s", again.ApprovalID, h.ApprovalID)
	}

	// Who may see and decide: bob (an approver), not alice.
	if resp, body := alice.do(t, "GET", "/approvals", nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice lists approvals: %d %s", resp.StatusCode, body)
	}
	if code, body := decide(t, alice, h.ApprovalID, "approve", "mine"); code != http.StatusForbidden {
		t.Errorf("alice approves her own call: %d %s", code, body)
	}
	resp, body := bob.do(t, "GET", "/approvals", nil, nil)
	assertContains(t, "bob's GET /approvals", string(body), h.ApprovalID, `"tool":"exec"`, `"key":"alice"`, "echo ran")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /approvals: %d", resp.StatusCode)
	}
	// alice may read her own approval; carol may not read alice's (she is
	// an approver: she may), bob's call is not alice's to read.
	if resp, _ := alice.do(t, "GET", "/approvals/"+h.ApprovalID, nil, nil); resp.StatusCode != 200 {
		t.Errorf("alice reads her approval: %d", resp.StatusCode)
	}

	// Approved by bob.
	if code, body := decide(t, bob, h.ApprovalID, "approve", "looks fine"); code != 200 || !strings.Contains(body, `"status":"approved"`) {
		t.Fatalf("bob approves: %d %s", code, body)
	}
	if code, _ := decide(t, bob, h.ApprovalID, "reject", "changed my mind"); code != http.StatusConflict {
		t.Errorf("a second decision: %d, want 409", code)
	}

	// Attacks on the approved call: none runs it.
	// Another key presenting alice's approval, and another key's same call.
	mustFail(t, carol.invoke(t, "exec", cmd, "X-Approval", h.ApprovalID), "approval_invalid", "no approval")
	held(t, carol.invoke(t, "exec", cmd))
	// Other arguments with alice's approval.
	mustFail(t, alice.invoke(t, "exec", map[string]any{"command": "echo evil >> ran.txt", "timeout": 30}, "X-Approval", h.ApprovalID),
		"approval_invalid", "hash to "+h.ArgumentsSHA256, "exact call approved")
	mustFail(t, alice.invoke(t, "exec", `{"command": "echo ran >> ran.txt", "timeout": 31}`, "X-Approval", h.ApprovalID), "approval_invalid")
	// A member named twice: which one a reader takes is not agreed on.
	mustFail(t, alice.invoke(t, "exec", `{"command": "echo ran >> ran.txt", "command": "echo evil >> ran.txt", "timeout": 30}`, "X-Approval", h.ApprovalID), "invalid_arguments")
	// An ID that does not exist.
	mustFail(t, alice.invoke(t, "exec", cmd, "X-Approval", "not-an-approval"), "approval_invalid")
	if ran() != "" {
		t.Fatalf("a call ran without a valid approval: %q", ran())
	}

	// The approved call, its members in another order and its number
	// spelt otherwise: the same arguments, so it runs, once.
	res := alice.invoke(t, "exec", `{"timeout": 3.0e1, "command": "echo ran >> ran.txt"}`, "X-Approval", h.ApprovalID)
	mustSucceed(t, res)
	if ran() != "ran\n" {
		t.Fatalf("after the approved call: %q", ran())
	}
	// Replayed, with the ID and without: held anew, never run again.
	mustFail(t, alice.invoke(t, "exec", cmd, "X-Approval", h.ApprovalID), "approval_invalid", "already run its call")
	next := held(t, alice.invoke(t, "exec", cmd))
	if next.ApprovalID == h.ApprovalID {
		t.Error("the call sent after its approval was used got the used approval again")
	}
	if ran() != "ran\n" {
		t.Fatalf("an approval ran its call twice: %q", ran())
	}

	// Rejected, with a reason the model reads.
	w := held(t, alice.invoke(t, "write_file", map[string]any{"path": "./deploy/../deploy/prod.yaml", "content": "x"}))
	if code, body := decide(t, bob, w.ApprovalID, "reject", "no deploys on Fridays"); code != 200 {
		t.Fatalf("bob rejects: %d %s", code, body)
	}
	mustFail(t, alice.invoke(t, "write_file", map[string]any{"path": "./deploy/../deploy/prod.yaml", "content": "x"}), "approval_rejected", "no deploys on Fridays", "bob")
	if _, err := os.Stat(filepath.Join(s.Workspace, "deploy/prod.yaml")); err == nil {
		t.Error("a rejected write ran")
	}
	// A path no pattern names runs at once.
	mustSucceed(t, alice.invoke(t, "write_file", map[string]any{"path": "notes/a.txt", "content": "x"}))

	// carol may approve her own call (self_approve); bob may not his.
	c := held(t, carol.invoke(t, "exec", map[string]any{"command": "true"}))
	if code, body := decide(t, carol, c.ApprovalID, "approve", ""); code != 200 {
		t.Errorf("carol approves her own call with self_approve: %d %s", code, body)
	}
	b := held(t, bob.invoke(t, "exec", map[string]any{"command": "true"}))
	if code, _ := decide(t, bob, b.ApprovalID, "approve", ""); code != http.StatusForbidden {
		t.Errorf("bob approves his own call: %d, want 403", code)
	}

	// The audit log: the held call, the decision, the run under it, with
	// who decided, when and why.
	var sawRun, sawHeld, sawRejected bool
	for _, ap := range auditApprovals(t, s) {
		switch {
		case ap["id"] == h.ApprovalID && ap["outcome"] == "approved":
			sawRun = ap["decided_by"] == "bob" && ap["reason"] == "looks fine" && ap["decided_at"] != nil && ap["record_status"] == "success"
		case ap["id"] == h.ApprovalID && ap["outcome"] == "held":
			sawHeld = ap["record_status"] == registry.StatusApprovalRequired
		case ap["id"] == w.ApprovalID && ap["outcome"] == "rejected":
			sawRejected = ap["reason"] == "no deploys on Fridays"
		}
	}
	if !sawRun || !sawHeld || !sawRejected {
		t.Errorf("audit records of approvals: run under it %v, held %v, rejected %v:\n%v", sawRun, sawHeld, sawRejected, auditApprovals(t, s))
	}
}

// TestApprovalStreamWaits: a held call made with Accept: text/event-stream
// gets an approval_required event, waits for the decision, and then its
// result: the caller makes one request.
func TestApprovalStreamWaits(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, nil)
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)
	req, _ := http.NewRequest("POST", s.URL+"/tools/exec/invoke", strings.NewReader(`{"command": "echo streamed"}`))
	req.Header.Set("Authorization", "Bearer "+alice.Key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var event string
	var id string
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var res registry.Result
		if err := json.Unmarshal([]byte(data), &res); err != nil {
			t.Fatalf("event %s: %v", event, err)
		}
		switch event {
		case "approval_required":
			id = held(t, res).ApprovalID
			time.Sleep(100 * time.Millisecond)
			if code, body := decide(t, bob, id, "approve", ""); code != 200 {
				t.Fatalf("bob approves: %d %s", code, body)
			}
		case "result":
			if id == "" {
				t.Fatalf("the result came before an approval_required event: %s", data)
			}
			assertContains(t, "the streamed result", mustSucceed(t, res), "streamed")
			return
		}
	}
	t.Fatalf("the stream ended without a result: %v", sc.Err())
}

// TestApprovalAcrossReplicasAndRestart: with TOOLSVC_DATABASE_URL, a call
// held on one replica is decided on the other and runs when sent to
// either; without it, an approval outlives a restart (the data folder
// keeps it).
func TestApprovalAcrossReplicasAndRestart(t *testing.T) {
	t.Parallel()
	t.Run("replicas", func(t *testing.T) {
		db := pgtest.NewDatabase(t)
		a := startApprovals(t, map[string]string{"DATABASE_URL": db})
		b := startApprovals(t, map[string]string{"DATABASE_URL": db, "WORKSPACE": a.Workspace}, asProcess())
		h := held(t, a.asKey(policyAliceKey).invoke(t, "exec", map[string]any{"command": "echo replica >> r.txt"}))
		resp, body := b.asKey(policyBobKey).do(t, "GET", "/approvals", nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), h.ApprovalID) {
			t.Fatalf("the other replica lists: %d %s", resp.StatusCode, body)
		}
		if code, body := decide(t, b.asKey(policyBobKey), h.ApprovalID, "approve", "ok"); code != 200 {
			t.Fatalf("approved on the other replica: %d %s", code, body)
		}
		mustSucceed(t, b.asKey(policyAliceKey).invoke(t, "exec", map[string]any{"command": "echo replica >> r.txt"}))
		// Used on one replica, refused on the other.
		mustFail(t, a.asKey(policyAliceKey).invoke(t, "exec", map[string]any{"command": "echo replica >> r.txt"}, "X-Approval", h.ApprovalID), "approval_invalid", "already run")
		if data, _ := os.ReadFile(filepath.Join(a.Workspace, "r.txt")); string(data) != "replica\n" {
			t.Errorf("r.txt = %q", data)
		}
	})
	t.Run("restart", func(t *testing.T) {
		first := startApprovals(t, nil)
		h := held(t, first.asKey(policyAliceKey).invoke(t, "exec", map[string]any{"command": "echo restarted"}))
		first.Stop(t)
		second := startApprovals(t, map[string]string{"DATA_DIR": first.DataDir, "WORKSPACE": first.Workspace})
		if code, body := decide(t, second.asKey(policyBobKey), h.ApprovalID, "approve", ""); code != 200 {
			t.Fatalf("approved after a restart: %d %s", code, body)
		}
		assertContains(t, "the call after a restart", mustSucceed(t, second.asKey(policyAliceKey).invoke(t, "exec", map[string]any{"command": "echo restarted"})), "restarted")
	})
}
