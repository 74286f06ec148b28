package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/auditcli"
)

// auditKeys makes an Ed25519 key pair as the docs do (openssl genpkey,
// openssl pkey -pubout), or, without openssl, the same PEM files in Go.
func auditKeys(t *testing.T) (private, public string) {
	dir := t.TempDir()
	private, public = filepath.Join(dir, "audit.pem"), filepath.Join(dir, "audit.pub")
	if _, err := exec.LookPath("openssl"); err == nil {
		if out, err := exec.Command("openssl", "genpkey", "-algorithm", "ed25519", "-out", private).CombinedOutput(); err != nil {
			t.Fatalf("openssl genpkey: %v: %s", err, out)
		}
		if out, err := exec.Command("openssl", "pkey", "-in", private, "-pubout", "-out", public).CombinedOutput(); err != nil {
			t.Fatalf("openssl pkey: %v: %s", err, out)
		}
		return private, public
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	os.WriteFile(private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	os.WriteFile(public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
	return private, public
}

// auditCmd runs "toolsvc audit args..." as main would and returns its exit
// status and output.
func auditCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errs bytes.Buffer
	err := run(context.Background(), append([]string{"audit"}, args...), nil, &out, &errs)
	var st exitStatus
	switch {
	case err == nil:
		return 0, out.String() + errs.String()
	case errors.As(err, &st):
		return int(st), out.String() + errs.String()
	}
	t.Fatalf("toolsvc audit %v: %v", args, err)
	return 0, ""
}

// TestAuditChainAcrossKill runs the binary with a signing key, kills it
// (SIGKILL) during a call, starts it again, stops it, and checks with
// "toolsvc audit" that the log verifies at each step; that the records
// shipped to stdout carry seq and prev; that the killed call joined the
// chain as interrupted; that show, grep and tail find records; and that a
// record edited afterwards is named.
func TestAuditChainAcrossKill(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	ws, data := filepath.Join(base, "ws"), filepath.Join(base, "data")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	realWS, _ := filepath.EvalSymlinks(ws)
	t.Cleanup(func() { killProcessesIn(realWS) })
	private, public := auditKeys(t)
	env := map[string]string{"WORKSPACE": ws, "DATA_DIR": data, "EXEC_SANDBOX": "none", "REPLICA_ID": "e2e-1",
		"AUDIT_SIGNING_KEY_FILE": private, "AUDIT_STDOUT": "true"}
	first := startServer(t, env, asProcess())
	first.writeWS(t, "a.txt", "hello\n")
	calls(t, first, 40)
	go func() {
		// The answer never comes: the service dies first.
		resp, err := http.Post(first.URL+"/tools/exec/invoke", "application/json", strings.NewReader(`{"command":"echo go > started && sleep 300","timeout":600}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitForFile(t, filepath.Join(ws, "started"))
	first.Kill(t)
	if strings.Contains(first.Logs(), private) || !strings.Contains(first.Logs(), `{"seq":40,"prev":"`) {
		t.Errorf("stdout: the 40th record's line with seq and prev, and never the key's file name expected:\n%s", first.Logs())
	}
	if code, out := auditCmd(t, "verify", "-pubkey", public, data); code != auditcli.ExitOK || !strings.Contains(out, "not yet sealed") {
		t.Fatalf("verify after SIGKILL: exit %d\n%s", code, out)
	}

	second := startServer(t, env, asProcess())
	calls(t, second, 20)
	second.Stop(t)
	code, out := auditCmd(t, "verify", "-pubkey", public, data)
	if code != auditcli.ExitOK || !strings.Contains(out, "61 records in 1 chains") || strings.Contains(out, "not yet sealed") {
		t.Fatalf("verify after the restart: exit %d\n%s", code, out)
	}

	code, out = auditCmd(t, "grep", "-status", "interrupted", "-json", data)
	var rec audit.Record
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Seq != 41 || rec.ToolName != "exec" {
		t.Fatalf("grep the interrupted call: exit %d: %s", code, out)
	}
	if code, out := auditCmd(t, "show", rec.CallID, data); code != 0 || !strings.Contains(out, `"status": "interrupted"`) {
		t.Errorf("show: exit %d: %s", code, out)
	}
	if code, out := auditCmd(t, "show", "no-such-call", data); code != auditcli.ExitFound {
		t.Errorf("show of an unknown call: exit %d: %s", code, out)
	}
	if code, out := auditCmd(t, "grep", "-tool", "read_file", data); code != 0 || strings.Count(out, "read_file") != 60 || !strings.HasPrefix(out, "STARTED") {
		t.Errorf("grep -tool read_file: exit %d:\n%s", code, out)
	}
	if code, out := auditCmd(t, "tail", "-n", "3", "-json", data); code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("tail -n 3: exit %d:\n%s", code, out)
	}

	// An edit after the fact is named.
	path := filepath.Join(data, "audit_logs", audit.FileName(rec))
	raw, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(raw, []byte("interrupted"), []byte("success"), 1), 0o640)
	code, out = auditCmd(t, "verify", "-pubkey", public, data)
	if code != auditcli.ExitFound || !strings.Contains(out, "edited: chain \"e2e-1\" seq 41 ("+filepath.ToSlash(audit.FileName(rec))+")") {
		t.Errorf("verify after an edit: exit %d\n%s", code, out)
	}
}

// calls makes n read_file calls, eight at a time.
func calls(t *testing.T, s *testServer, n int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			mustSucceed(t, s.invoke(t, "read_file", map[string]any{"path": "a.txt"}, "X-Session-ID", fmt.Sprint("s", i)))
		})
	}
	wg.Wait()
}
