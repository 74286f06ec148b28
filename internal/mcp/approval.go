package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/registry"
)

// A call the approval rules hold reaches an MCP client in one of two
// ways, by the protocol revision the client speaks:
//
//   - From 2026-07-28 on (multi round-trip requests), a client that takes
//     elicitation forms is asked at once: the call answers
//     resultType "input_required" with a form (approve or reject, with
//     the summary, the arguments' hash and the expiry) and a sealed
//     requestState naming the approval, the key, the tool and the
//     arguments' hash. The client shows the form to its user and sends
//     the call again with the answer and the requestState; any replica
//     holding the same seal key takes it up, has the approval decided by
//     the caller's key (which must be an approver with self_approve: a
//     person at the client is no approver otherwise) and runs the call
//     under it through the registry, as a call presenting X-Approval.
//   - Earlier revisions (and clients that take no forms) get what REST
//     gives: a result, not an error, whose text tells the model that the
//     call waits and has not run, with the approval in structuredContent.
//     The same call sent again by the same key runs once approved.

// approvalInput is the key of the approval question among a result's
// inputRequests, and of its answer among the retry's inputResponses.
const approvalInput = "approval"

// firstMRTRVersion is the first protocol revision with multi round-trip
// requests.
const firstMRTRVersion = "2026-07-28"

// holds answers the calls the approval rules hold.
type holds struct {
	svc    *approval.Service // nil: the client is never asked
	seal   *approval.Sealer
	invoke Invoker
	key    func(ctx context.Context) string
	now    func() time.Time
}

// newHolds returns the held calls' handling for opts; it panics on a seal
// key of the wrong size, which the configuration's checks refuse first.
func newHolds(opts Options) *holds {
	seal, err := approval.NewSealer(opts.SealKey)
	if err != nil {
		panic("mcp: " + err.Error())
	}
	key := opts.Key
	if key == nil {
		key = func(context.Context) string { return "" }
	}
	return &holds{svc: opts.Approvals, seal: seal, invoke: opts.Invoke, key: key, now: time.Now}
}

// presentedKey carries, in a call's context, the approval the call
// presents (the client's answer named it): the Invoker gives it to the
// registry as the call's Facts.Approval.
type presentedKey struct{}

// PresentedApproval is the ID of the approval a call run by the MCP
// handler presents, "" for most calls: the Invoker sets it as the call's
// Facts.Approval, as the X-Approval header does over REST.
func PresentedApproval(ctx context.Context) string {
	id, _ := ctx.Value(presentedKey{}).(string)
	return id
}

// call runs a tools/call through the SDK's handler: a retry carrying an
// answer goes to resume, a held result to held.
func (ho *holds) call(ctx context.Context, req *sdk.CallToolRequest, t registry.Target) (*sdk.CallToolResult, error) {
	p := req.Params
	if p.RequestState != "" || len(p.InputResponses) > 0 {
		return ho.resume(ctx, req, t)
	}
	res, refused := ho.invoke(ctx, t, p.Arguments)
	if e := rateLimited(res, refused); e != nil {
		return nil, e
	}
	if res.Status == registry.StatusApprovalRequired && refused == "" {
		return ho.held(ctx, req, res), nil
	}
	return result(res, refused).sdk(), nil
}

// held answers a held call: with the question to the client's user when
// the client can take it and the caller's key may decide its own call,
// else as REST does.
func (ho *holds) held(ctx context.Context, req *sdk.CallToolRequest, res registry.Result) *sdk.CallToolResult {
	if ho.svc == nil || !multiRoundTrip(req) || !takesForms(req.Params.Meta) || res.ExpiresAt == nil {
		return heldResult(res, "")
	}
	key := ho.key(ctx)
	if !ho.svc.MayDecideOwn(key) {
		// Asking the user would be asking someone whose yes does not count.
		return heldResult(res, "Its approval is not asked of this client: this key may not approve its own calls, so an approver decides it (GET and POST /approvals).")
	}
	sha, err := approval.Hash(argsOrEmpty(req.Params.Arguments))
	if err != nil {
		return heldResult(res, "")
	}
	state, err := ho.seal.Seal(approval.Ticket{ID: res.ApprovalID, Key: key, Tool: res.Tool, ArgumentsSHA256: sha, ExpiresAt: *res.ExpiresAt})
	if err != nil {
		return heldResult(res, "")
	}
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{approvalInput: approvalForm(res)}, RequestState: state}
}

// resume takes up a held call sent again with the requestState the
// service gave it and the user's answer: the answer decides the
// approval, and the call runs under it (or comes back as rejected, or
// still waiting).
func (ho *holds) resume(ctx context.Context, req *sdk.CallToolRequest, t registry.Target) (*sdk.CallToolResult, error) {
	p := req.Params
	const again = "Next: send the call again without requestState and inputResponses; if it still needs approval, it is asked anew."
	if ho.svc == nil || p.RequestState == "" {
		return refusal("this call carries inputResponses or a requestState, but this service asked nothing of the client for it. " + again), nil
	}
	tk, err := ho.seal.Open(p.RequestState, ho.now())
	switch {
	case errors.Is(err, approval.ErrSealExpired):
		return refusal(fmt.Sprintf("the approval question of this call lapsed at %s, with its approval. %s", tk.ExpiresAt.UTC().Format(time.RFC3339), again)), nil
	case err != nil:
		return refusal("the requestState of this call is not one this service gave (it was changed, cut, or sealed with another key, as by a replica configured otherwise); nothing was decided and nothing ran. " + again), nil
	}
	if tk.Key != ho.key(ctx) {
		return refusal("the requestState of this call was given to another key's call; nothing was decided and nothing ran. " + again), nil
	}
	sha, err := approval.Hash(argsOrEmpty(p.Arguments))
	if err != nil || tk.Tool != p.Name || sha != tk.ArgumentsSHA256 {
		return refusal(fmt.Sprintf("the requestState of this call was given for a call of %s whose arguments hash to %s, not for this call of %s (arguments hash to %s): an answer decides only the call it was asked about, so nothing was decided and nothing ran. Next: send exactly the arguments that were asked about with this requestState, or send this call without requestState and inputResponses to ask about it.",
			tk.Tool, tk.ArgumentsSHA256, p.Name, orNone(sha))), nil
	}
	ans, _ := p.InputResponses[approvalInput].(*sdk.ElicitResult)
	if ans == nil {
		// The answer is missing: the protocol asks to put the question
		// again, which the call does when sent as it first was.
		req2 := *req
		p2 := *p
		p2.RequestState, p2.InputResponses = "", nil
		req2.Params = &p2
		return ho.call(ctx, &req2, t)
	}
	note, err := ho.decide(ctx, tk, ans)
	if err != nil {
		return refusal(err.Error()), nil
	}
	res, refused := ho.invoke(context.WithValue(ctx, presentedKey{}, tk.ID), t, p.Arguments)
	if e := rateLimited(res, refused); e != nil {
		return nil, e
	}
	if res.Status == registry.StatusApprovalRequired && refused == "" {
		return heldResult(res, note), nil
	}
	return result(res, refused).sdk(), nil
}

// decide decides the approval of tk as the user's answer says, in the
// name of the caller's key, and returns what the model is told of an
// answer that did not decide it. An error is a failure of the store.
func (ho *holds) decide(ctx context.Context, tk approval.Ticket, ans *sdk.ElicitResult) (string, error) {
	decision, reason := "", ""
	if r, ok := ans.Content["reason"].(string); ok {
		reason = r
	}
	switch ans.Action {
	case "accept":
		decision = "reject"
		if yes, _ := ans.Content["approve"].(bool); yes {
			decision = "approve"
		}
	case "decline":
		decision = "reject"
		if reason == "" {
			reason = "declined when asked in the MCP client"
		}
	default: // "cancel", or an action the protocol does not name
		return "The person asked in the client dismissed the question without deciding.", nil
	}
	if len(reason) > 2000 {
		reason = reason[:2000]
	}
	_, err := ho.svc.Decide(ctx, ho.key(ctx), tk.ID, decision, reason)
	switch {
	case err == nil, errors.Is(err, approval.ErrDecided), errors.Is(err, approval.ErrExpired), errors.Is(err, approval.ErrNotFound):
		// Decided now, or before by an approver, or gone: the registry
		// tells the call what became of it.
		return "", nil
	case errors.Is(err, approval.ErrNotApprover), errors.Is(err, approval.ErrOwnCall):
		return fmt.Sprintf("The answer given in the client (%s) was not taken as a decision: %v. An approver decides it (GET and POST /approvals).", decision, err), nil
	}
	return "", fmt.Errorf("the answer to the approval question could not be recorded (the service cannot keep approvals right now), so nothing ran. Next: try again in a minute; if it keeps failing, tell the user the tool service needs its operator")
}

// approvalForm is the question put to the client's user: approve or
// reject, with what the call does, the hash of its arguments and until
// when it may be decided.
func approvalForm(res registry.Result) *sdk.ElicitParams {
	msg := fmt.Sprintf("A tool call waits for your approval and has not run.\n\n%s\n\nTool: %s\nArguments SHA-256: %s\nApproval: %s, open until %s.\n\nApprove to run exactly this call, once; reject to refuse it (a reason helps the model change course).",
		res.Summary, res.Tool, res.ArgumentsSHA256, res.ApprovalID, res.ExpiresAt.UTC().Format(time.RFC3339))
	return &sdk.ElicitParams{
		Mode:    "form",
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Approve this call", "description": "Yes runs the call once, exactly as shown; no rejects it.", "default": false},
				"reason":  map[string]any{"type": "string", "title": "Reason", "description": "Why (optional); the model reads it when the call is rejected.", "maxLength": 2000},
			},
			"required": []string{"approve"},
		},
	}
}

// heldInfo is the structuredContent of a held call's result: what REST
// gives besides the text.
type heldInfo struct {
	Status          string `json:"status"`
	ApprovalID      string `json:"approval_id"`
	ArgumentsSHA256 string `json:"arguments_sha256"`
	Summary         string `json:"summary"`
	ExpiresAt       string `json:"expires_at,omitempty"`
}

// heldResult is a held call's result as REST gives it, for clients that
// are not asked: the text, preceded by note, says the call waits and has
// not run, and structuredContent names the approval. It is no error: the
// call did not fail, and a client that retries or reports failed calls
// should do neither; the text keeps the model from taking it for done.
func heldResult(res registry.Result, note string) *sdk.CallToolResult {
	text := res.Result
	if note != "" {
		text = note + " " + text
	}
	info := heldInfo{Status: res.Status, ApprovalID: res.ApprovalID, ArgumentsSHA256: res.ArgumentsSHA256, Summary: res.Summary}
	if res.ExpiresAt != nil {
		info.ExpiresAt = res.ExpiresAt.UTC().Format(time.RFC3339)
	}
	tc := &sdk.TextContent{Text: text, Meta: sdk.Meta{"call_id": res.CallID, "status": res.Status, "duration_ms": res.DurationMS}}
	return &sdk.CallToolResult{Content: []sdk.Content{tc}, StructuredContent: info}
}

// heldResponse is a JSON-RPC response carrying a held call's result, for
// the fast path.
type heldResponse struct {
	JSONRPC string              `json:"jsonrpc"`
	ID      json.RawMessage     `json:"id"`
	Result  *sdk.CallToolResult `json:"result"`
}

// refusal is a tool error for a retry the service would not take up.
func refusal(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "Error: " + msg}}}
}

// multiRoundTrip reports whether the SDK treats the request's client as
// one of 2026-07-28 or later: such a session has no InitializeParams,
// or they name such a version. An input request sent to an older one
// would be turned by the SDK into a server-to-client request, which a
// stateless server cannot make.
func multiRoundTrip(req *sdk.CallToolRequest) bool {
	if req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= firstMRTRVersion
}

// takesForms reports whether the request's client capabilities (sent
// with each request from 2026-07-28 on) take form elicitation: an empty
// elicitation capability means form mode.
func takesForms(meta sdk.Meta) bool {
	caps, _ := meta[sdk.MetaKeyClientCapabilities].(map[string]any)
	el, ok := caps["elicitation"].(map[string]any)
	if !ok {
		return false
	}
	if len(el) == 0 {
		return true
	}
	_, form := el["form"]
	return form
}

func argsOrEmpty(args []byte) []byte {
	if len(args) == 0 {
		return []byte("{}")
	}
	return args
}

func orNone(s string) string {
	if s == "" {
		return "nothing (they are not one JSON object read one way)"
	}
	return s
}
