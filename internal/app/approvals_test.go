package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApprovalsNeedADecider: approval rules that no key may decide stop
// start-up, naming what holds and what to set; an approver key or an
// admin key lets it start.
func TestApprovalsNeedADecider(t *testing.T) {
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("approval: {exec: always}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toolsFile := filepath.Join(dir, "tools.yaml")
	tools := "tools:\n  - name: deploy\n    description: Deploys.\n    parameters: {type: object, additionalProperties: false}\n    command: [\"true\"]\n    approval: always\n"
	if err := os.WriteFile(toolsFile, []byte(tools), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := "alice=alice-key-0123456789abcdef,bob=bob-key-0123456789abcdef"
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"policy, no approver", map[string]string{"API_KEYS": keys, "POLICY_FILE": policyFile}, "the policy file's approval rules hold calls"},
		{"tools file, no keys", map[string]string{"TOOLS_FILE": toolsFile}, "the tool deploy's approval rule in the tools file hold calls"},
		{"an approver", map[string]string{"API_KEYS": keys, "POLICY_FILE": policyFile, "APPROVER_KEYS": "bob"}, ""},
		{"an admin", map[string]string{"API_KEYS": keys, "POLICY_FILE": policyFile, "ADMIN_KEYS": "root=root-key-0123456789abcdef"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(testConfig(t, tc.vars), Options{})
			if a != nil {
				t.Cleanup(a.Close)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "TOOLSVC_APPROVER_KEYS")):
				t.Fatalf("New: %v; want an error with %q", err, tc.want)
			}
		})
	}
}
