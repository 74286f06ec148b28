package app

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/policy"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
)

const (
	// approvalSweep is how often approvals whose time ran out are marked
	// expired (and recorded); approvalKeep how long ended ones are kept
	// for GET /approvals/{id}.
	approvalSweep = 30 * time.Second
	approvalKeep  = 7 * 24 * time.Hour
)

// newApprovals builds the hold point every call passes before it runs:
// the policy file's approval rules (enf, nil without a policy file) and
// the tools file's, approvals kept in the shared database when there is
// one (any replica can decide and resume them), else in the data folder
// (a restart keeps them). The approvers are the keys APPROVER_KEYS names
// and the admin keys.
func (a *App) newApprovals(cfg config.Access, enf *policy.Enforcer, red *redact.Redactor) (*approval.Service, error) {
	var store approval.Store
	if a.shared != nil {
		store = a.shared.Approvals()
	} else {
		fs, err := approval.OpenFileStore(filepath.Join(a.dataDir, "approvals"))
		if err != nil {
			return nil, err
		}
		store = fs
	}
	admins := cfg.AdminKeys.Names()
	rules := func(string) (approval.Rules, bool) { return approval.Rules{}, false }
	if enf != nil {
		rules = enf.Approval
	}
	reg := a.reg
	svc := approval.New(approval.Options{
		Store:    store,
		Rules:    rules,
		Approver: func(key string) bool { return slices.Contains(cfg.ApproverKeys, key) || slices.Contains(admins, key) },
		TTL:      cfg.ApprovalTTL,
		Record: func(ap approval.Approval, rec audit.Approval) {
			status := map[string]string{"expired": "expired"}[rec.Outcome]
			if status == "" {
				status = ap.Status
			}
			reg.RecordApproval(ap.Tool, registry.Meta{Key: ap.Key, SessionID: ap.SessionID, Workspace: ap.Workspace}, status, rec)
		},
		Redact: red.String,
		NewID:  uuid.NewString,
		Log:    a.log,
	})
	svc.Start(a.stopping, approvalSweep, approvalKeep)
	a.reg.SetHolder(svc)
	return svc, nil
}

// checkApprovers refuses to start a service whose approval rules (the
// policy file's, or a tool's own in the tools file) hold calls that no
// key may decide: they would wait until they expire, every one. The
// deciders are the keys APPROVER_KEYS names and the admin keys.
func (a *App) checkApprovers(cfg config.Access, enf *policy.Enforcer) error {
	if len(cfg.ApproverKeys) > 0 || len(cfg.AdminKeys) > 0 {
		return nil
	}
	var holding []string
	if enf != nil && enf.HoldsAny() {
		holding = append(holding, "the policy file's approval rules")
	}
	for _, name := range a.reg.Names() {
		t, _ := a.reg.Tool(name)
		if r, ok := t.(approval.Ruled); ok {
			if rule, given := r.ApprovalRule(); given && rule.Kind != approval.Never {
				holding = append(holding, "the tool "+name+"'s approval rule in the tools file")
			}
		}
	}
	if len(holding) == 0 {
		return nil
	}
	return fmt.Errorf("%s hold calls for a person, and no key may decide them: set TOOLSVC_APPROVER_KEYS to names of keys in TOOLSVC_API_KEYS (or set TOOLSVC_ADMIN_KEYS); without keys, nobody can approve", strings.Join(holding, " and "))
}
