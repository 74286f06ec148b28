package app

import (
	"path/filepath"
	"slices"
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
