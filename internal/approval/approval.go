// Package approval holds calls for a person's decision. Rules (from the
// policy file, and a tool's own) say which calls wait; a held call gets
// an approval bound to its key, its tool and the hash of its canonical
// arguments, which an approver decides; the call runs once, when it is
// sent again with exactly those arguments by the same key, before the
// approval expires. It knows nothing of HTTP or MCP: the doors present
// the approval a caller gives (callinfo.Facts.Approval) and list and
// decide approvals through Service.
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Error codes of calls refused for their approval.
const (
	CodeRejected = toolerr.ApprovalRejected
	CodeExpired  = toolerr.ApprovalExpired
	CodeInvalid  = toolerr.ApprovalInvalid
)

// MaxWaiting bounds the approvals one key may have waiting at once: a
// model that makes ever new held calls cannot fill the store or the
// approvers' list; a call past it is refused (busy) until some are
// decided or expire.
const MaxWaiting = 100

// Ruled is a tool that carries an approval rule of its own (a tools
// file's tool with "approval"); the policy file's rules come first.
type Ruled interface {
	ApprovalRule() (Rule, bool)
}

// Summarizer is a tool that says in words what a call of it will do, for
// the person deciding ("run the command: git push origin main").
type Summarizer interface {
	Summarize(args []byte) string
}

// Options configure a Service.
type Options struct {
	Store Store
	// Rules returns the approval rules of the key named key, and whether
	// the key may approve its own calls (self_approve).
	Rules func(key string) (r Rules, selfApprove bool)
	// Approver reports whether the key named key may decide approvals.
	Approver func(key string) bool
	// TTL is how long an approval stays open (default 1 h).
	TTL time.Duration
	// Record writes an audit record of an approval's event that has no
	// call of its own: a decision, an expiry. Nil: none.
	Record func(a Approval, rec audit.Approval)
	Redact func(string) string
	Now    func() time.Time
	NewID  func() string
	Log    zerolog.Logger
	// Poll is how often Wait reads the store for a decision made by
	// another replica (default 500 ms); decisions made here wake it at
	// once.
	Poll time.Duration
}

// Service is the hold point: registry.Holder for the registry, and the
// approvals' list and decisions for the doors.
type Service struct {
	o       Options
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

// New returns a Service.
func New(o Options) *Service {
	if o.TTL <= 0 {
		o.TTL = time.Hour
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	return &Service{o: o, waiters: map[string][]chan struct{}{}}
}

// rule is the rule for a call of c by its key: the policy's, else the
// tool's own; false when none holds the call.
func (s *Service) rule(c registry.HoldCall) (Rule, bool) {
	if s.o.Rules != nil {
		if rules, _ := s.o.Rules(c.Facts.Key); !rules.Empty() {
			if r, ok := rules.For(c.Tool); ok {
				return r, true
			}
		}
	}
	if t, ok := c.Impl.(Ruled); ok {
		return t.ApprovalRule()
	}
	return Rule{}, false
}

// Hold is the registry's question before each call: run it, hold it, or
// refuse it.
func (s *Service) Hold(ctx context.Context, c registry.HoldCall) registry.HoldOutcome {
	r, ok := s.rule(c)
	if !ok || !r.Holds(c.Destructive, c.Args) {
		return registry.HoldOutcome{Run: true}
	}
	sha, err := Hash(c.Args)
	if err != nil {
		return registry.HoldOutcome{Code: toolerr.InvalidArguments,
			Message: fmt.Sprintf("the call of %s needs a person's approval, which is bound to its arguments, and they cannot be read exactly: %v. Next: send them again as plain JSON.", c.Tool, err)}
	}
	now := s.o.Now()
	if id := c.Facts.Approval; id != "" {
		return s.presented(ctx, c, id, sha, now)
	}
	a, err := s.o.Store.Find(ctx, c.Facts.Key, c.Tool, sha, now)
	switch {
	case err == nil && a.Status == StatusApproved:
		return s.use(ctx, c, a, now)
	case err == nil && a.Status == StatusRejected:
		return s.rejected(a)
	case err == nil:
		return s.held(a, "")
	case !errors.Is(err, ErrNotFound):
		return s.storeFailed(c, err)
	}
	if n, err := s.o.Store.Waiting(ctx, c.Facts.Key, now); err != nil {
		return s.storeFailed(c, err)
	} else if n >= MaxWaiting {
		return registry.HoldOutcome{Code: toolerr.Busy,
			Message: fmt.Sprintf("the call of %s needs a person's approval, and %d calls of this key already wait for one, the most that may. It did not run. Next: do not send more such calls now; tell the user that approvals wait (GET /approvals), and send this call again once some are decided.", c.Tool, n)}
	}
	a = Approval{ID: s.o.NewID(), Key: c.Facts.Key, Tool: c.Tool, ArgumentsSHA256: sha, Arguments: s.shown(c.Args),
		Summary: s.summary(c), Workspace: c.Facts.Workspace, SessionID: c.Facts.SessionID, CallID: c.CallID,
		Status: StatusPending, CreatedAt: now.UTC(), ExpiresAt: now.Add(s.o.TTL).UTC()}
	if err := s.o.Store.Create(ctx, a); err != nil {
		return s.storeFailed(c, err)
	}
	s.o.Log.Info().Str("approval_id", a.ID).Str("tool", a.Tool).Str("key", a.Key).Str("call_id", c.CallID).
		Time("expires_at", a.ExpiresAt).Msg("approval: a call waits for a person")
	return s.held(a, "")
}

// presented checks the approval a caller named for its call.
func (s *Service) presented(ctx context.Context, c registry.HoldCall, id, sha string, now time.Time) registry.HoldOutcome {
	a, err := s.o.Store.Get(ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return s.storeFailed(c, err)
	}
	refuse := func(code, msg string) registry.HoldOutcome {
		return registry.HoldOutcome{Code: code, Message: msg, Approval: &audit.Approval{ID: id, Outcome: "refused", ArgumentsSHA256: sha}}
	}
	// Another key's approval is not told from one that does not exist.
	if err != nil || a.Key != c.Facts.Key {
		return refuse(CodeInvalid, fmt.Sprintf("there is no approval %s for this key. Next: send the call without an approval ID to ask for one.", runes.Shorten(id, 64)))
	}
	if a.Tool != c.Tool || a.ArgumentsSHA256 != sha {
		return refuse(CodeInvalid, fmt.Sprintf("approval %s was given for a call of %s whose arguments hash to %s; this call of %s has arguments that hash to %s. An approval runs only the exact call approved. Next: send exactly the approved arguments, or send this call without the approval ID to ask for a new one.",
			a.ID, a.Tool, a.ArgumentsSHA256, c.Tool, sha))
	}
	switch {
	case a.Status == StatusRejected:
		return s.rejected(a)
	case a.UsedBy != "":
		return refuse(CodeInvalid, fmt.Sprintf("approval %s has already run its call (%s); an approval runs one call. Next: send the call without the approval ID to ask again.", a.ID, a.UsedBy))
	case a.Status == StatusExpired || !now.Before(a.ExpiresAt):
		return registry.HoldOutcome{Code: CodeExpired, Approval: &audit.Approval{ID: a.ID, Outcome: "expired", ArgumentsSHA256: sha},
			Message: fmt.Sprintf("approval %s expired at %s before it was used. Next: send the call without the approval ID to ask again.", a.ID, a.ExpiresAt.Format(time.RFC3339))}
	case a.Status == StatusPending:
		return s.held(a, "")
	}
	return s.use(ctx, c, a, now)
}

// use runs the call under a, an approved approval, marking it used.
func (s *Service) use(ctx context.Context, c registry.HoldCall, a Approval, now time.Time) registry.HoldOutcome {
	a, err := s.o.Store.Use(ctx, a.ID, c.CallID, now)
	switch {
	case errors.Is(err, ErrUsed):
		return registry.HoldOutcome{Code: CodeInvalid, Approval: &audit.Approval{ID: a.ID, Outcome: "refused", ArgumentsSHA256: a.ArgumentsSHA256},
			Message: fmt.Sprintf("approval %s has already run its call; an approval runs one call. Next: send the call without the approval ID to ask again.", a.ID)}
	case errors.Is(err, ErrExpired):
		return registry.HoldOutcome{Code: CodeExpired, Approval: &audit.Approval{ID: a.ID, Outcome: "expired", ArgumentsSHA256: a.ArgumentsSHA256},
			Message: fmt.Sprintf("approval %s expired before it was used. Next: send the call without the approval ID to ask again.", a.ID)}
	case err != nil:
		return s.storeFailed(c, err)
	}
	return registry.HoldOutcome{Run: true, Approval: record(a, "approved")}
}

func (s *Service) rejected(a Approval) registry.HoldOutcome {
	why := "no reason was given"
	if a.Reason != "" {
		why = "the reason given: " + a.Reason
	}
	return registry.HoldOutcome{Code: CodeRejected, Approval: record(a, "rejected"),
		Message: fmt.Sprintf("a person rejected this call of %s (approval %s, by %s); %s. Next: do not send it again as it is; change what you do in the light of the reason, or ask the user.", a.Tool, a.ID, orNobody(a.DecidedBy), why)}
}

func (s *Service) held(a Approval, _ string) registry.HoldOutcome {
	msg := fmt.Sprintf("This call of %s waits for a person's approval and has not run: %s. Approval %s, open until %s. Next: do not repeat the call yet; tell the user it waits for approval. Once it is approved, the same call with the same arguments runs.",
		a.Tool, a.Summary, a.ID, a.ExpiresAt.Format(time.RFC3339))
	return registry.HoldOutcome{
		Held:     &registry.Hold{ID: a.ID, ArgumentsSHA256: a.ArgumentsSHA256, Summary: a.Summary, ExpiresAt: a.ExpiresAt, Message: msg},
		Approval: &audit.Approval{ID: a.ID, Outcome: "held", ArgumentsSHA256: a.ArgumentsSHA256, ExpiresAt: &a.ExpiresAt},
	}
}

func (s *Service) storeFailed(c registry.HoldCall, err error) registry.HoldOutcome {
	s.o.Log.Error().Err(err).Str("tool", c.Tool).Str("call_id", c.CallID).Msg("approval: the store of approvals failed; the call was not run")
	return registry.HoldOutcome{Code: toolerr.ToolError,
		Message: fmt.Sprintf("the call of %s needs a person's approval, and the service cannot keep approvals right now, so it did not run. Next: try again in a minute; if it keeps failing, tell the user the tool service needs its operator.", c.Tool)}
}

// record is what an audit record says of a.
func record(a Approval, outcome string) *audit.Approval {
	return &audit.Approval{ID: a.ID, Outcome: outcome, ArgumentsSHA256: a.ArgumentsSHA256, DecidedBy: a.DecidedBy, DecidedAt: a.DecidedAt, Reason: a.Reason}
}

func orNobody(s string) string {
	if s == "" {
		return "an approver"
	}
	return s
}

// summaryChars bounds a summary; shownChars a string of the arguments as
// the person deciding sees them.
const (
	summaryChars = 600
	shownChars   = 2000
)

// summary says what the call will do: the tool's own words when it has
// them, else its name and arguments.
func (s *Service) summary(c registry.HoldCall) string {
	var text string
	if t, ok := c.Impl.(Summarizer); ok {
		text = t.Summarize(c.Args)
	}
	if text == "" {
		text = genericSummary(c.Tool, c.Args)
	}
	return runes.Shorten(s.o.Redact(text), summaryChars)
}

// genericSummary names the tool and each argument with its value.
func genericSummary(tool string, args []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || len(m) == 0 {
		return "call " + tool
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		v := string(m[n])
		var str string
		if json.Unmarshal(m[n], &str) == nil {
			v = str
		}
		parts = append(parts, n+" = "+runes.Shorten(v, 200))
	}
	return "call " + tool + " with " + strings.Join(parts, "; ")
}

// shown are the arguments as an approver sees them: redacted, long strings
// cut.
func (s *Service) shown(args []byte) json.RawMessage {
	red := s.o.Redact(string(args))
	var v any
	if json.Unmarshal([]byte(red), &v) != nil {
		b, _ := json.Marshal(runes.Shorten(red, shownChars)) // a string: cannot fail
		return b
	}
	b, err := json.Marshal(cut(v))
	if err != nil {
		return nil
	}
	return b
}

func cut(v any) any {
	switch v := v.(type) {
	case string:
		return runes.Shorten(v, shownChars)
	case []any:
		for i := range v {
			v[i] = cut(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = cut(v[k])
		}
	}
	return v
}
