package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tracing"
)

// Task statuses.
const (
	StatusRunning     = "running"
	StatusCompleted   = "completed"
	StatusFailed      = "failed"
	StatusCanceled    = "canceled"
	StatusInterrupted = "interrupted"
	// StatusWaitingApproval is a running task stopped at a tool call held
	// for a person's approval (Task.Approval names it): it goes on, as
	// running, once the approval is decided or has expired.
	StatusWaitingApproval = "waiting_approval"
)

// Active reports whether a task of status has not ended: running, or
// waiting for an approval.
func Active(status string) bool {
	return status == StatusRunning || status == StatusWaitingApproval
}

// ApprovalWait is the approval a task waits for (Task.Approval, and the
// waiting_approval event), and what became of it (the resumed event).
type ApprovalWait struct {
	ID        string     `json:"approval_id"`
	Tool      string     `json:"tool"`
	Summary   string     `json:"summary,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Status, DecidedBy and Reason: the decision, in a resumed event
	// (approved, rejected or expired; empty when the approvals could
	// not be read, Error then says why).
	Status    string `json:"status,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Error     string `json:"error,omitempty"`
}

// CallRecord is one tool call a sub-agent made, for GET /agents/{id}.
type CallRecord struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // cut to maxArgsChars
	Status    string `json:"status"`
	ErrorCode string `json:"error_code,omitempty"`
	CallID    string `json:"call_id,omitempty"` // the audit record's call ID
	// ApprovalID names the approval the call waited for, when it was
	// held for a person: it ran, or was refused, under it.
	ApprovalID string `json:"approval_id,omitempty"`
}

// Task is one sub-agent's task, as kept in DATA_DIR/agents/<id>.json.
type Task struct {
	ID         string       `json:"id"`
	Label      string       `json:"label,omitempty"`
	Task       string       `json:"task"`
	Model      string       `json:"model,omitempty"`
	Status     string       `json:"status"`
	CreatedAt  time.Time    `json:"created_at"`
	UpdatedAt  time.Time    `json:"updated_at"`
	FinishedAt *time.Time   `json:"finished_at,omitempty"`
	Turns      int          `json:"turns"`
	CallCount  int          `json:"tool_call_count"`
	ToolCalls  []CallRecord `json:"tool_calls"`
	Answer     string       `json:"answer,omitempty"`
	Error      *Failure     `json:"error,omitempty"`
	// Owner is the name of the API key whose call started the task (never
	// the key); empty for a task started without keys, and in files of
	// before keys had names.
	Owner string `json:"owner,omitempty"`
	// Approval is the approval the task waits for while its status is
	// waiting_approval.
	Approval *ApprovalWait `json:"approval,omitempty"`
}

// Summary is a task without its calls and answer, for GET /agents.
type Summary struct {
	ID         string     `json:"id"`
	Label      string     `json:"label,omitempty"`
	Status     string     `json:"status"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Turns      int        `json:"turns"`
	Owner      string     `json:"owner,omitempty"`
	// Approval: as in Task, while the task waits for it.
	Approval *ApprovalWait `json:"approval,omitempty"`
}

const (
	maxArgsChars   = 200  // arguments kept per call record
	maxCallRecords = 500  // call records kept per task; CallCount keeps counting
	maxKeptTasks   = 1000 // finished task files kept; older ones are removed at start
	maxTaskChars   = 100_000
)

// ErrBusy is returned by Start when MaxConcurrent sub-agents are running.
var ErrBusy = errors.New("too many sub-agents running")

// KeyBusyError is returned by Start when Max sub-agents of the key the
// task would belong to are running (the key's subagents.max_running in
// the policy file).
type KeyBusyError struct{ Max int }

func (e *KeyBusyError) Error() string {
	return fmt.Sprintf("%d of the key's sub-agents are running", e.Max)
}

// ErrStopping is returned by Start once Close has begun.
var ErrStopping = errors.New("the service is shutting down")

var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sa-[0-9a-f]{12}$`) })

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Base, when set, stops every running task when it is done (shutdown).
	Base context.Context
	// Store keeps the tasks; nil: a FileTaskStore in Dir. A SharedStore
	// (PostgreSQL) lets every replica answer for every task.
	Store TaskStore
	Dir   string // where task files live without a Store; created if missing
	// Replica names this process in logs (TOOLSVC_REPLICA_ID).
	Replica string
	// Lease is how long a running task of a replica that stopped renewing
	// it stays running in a SharedStore (default 30s).
	Lease         time.Duration
	Model         Chatter
	ModelName     string // recorded in each task
	Tools         Tools
	MaxTurns      int
	Timeout       time.Duration // per task
	MaxConcurrent int
	Log           zerolog.Logger
	// Redact removes secrets from what is kept and shown (answers, errors,
	// arguments). Default: identity.
	Redact func(string) string
	Now    func() time.Time

	// Allowed names the tools of Tools a sub-agent may use; nil: none.
	// Never spawn or another agent tool: a sub-agent cannot start
	// sub-agents, and it cannot reach the user.
	Allowed []string
	// MoreAllowed, when set, names tools a sub-agent may use besides
	// Allowed, asked at the start of each sub-agent (tools from a file,
	// which a reload changes).
	MoreAllowed func() []string
	// KeyLimits, when set, gives the bounds of one key's sub-agents (the
	// policy file's subagents): how many of its tasks may run at once and
	// how many turns each may take; 0: no bound of the key's own. It is
	// asked as each task starts, so that a reload of the policy bounds the
	// tasks started after it; MaxConcurrent and MaxTurns still hold.
	KeyLimits func(key string) (maxRunning, maxTurns int)
	// Approvals, when set, is where a task whose tool call is held for a
	// person's approval waits for the decision (approval.Service): the
	// task shows waiting_approval meanwhile, its Timeout stands still
	// (the person's time is not the task's), its lease is renewed as a
	// running task's, and the call is sent again with the approval once
	// it is decided or has expired. Nil: the model gets the hold as the
	// call's result.
	Approvals ApprovalWaiter
}

// Manager starts sub-agents, keeps their tasks in its store and answers
// for them: for its own from memory, and, with a SharedStore, for every
// other replica's from the store.
type Manager struct {
	opts   ManagerOptions
	store  TaskStore
	shared SharedStore // nil with a store of one process
	sem    chan struct{}
	base   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	loop   chan struct{} // closed when the lease loop has stopped; nil without one

	mu    sync.Mutex
	tasks map[string]*entry
	// running counts each key's tasks running in this process, whatever
	// the policy says of them, so that a reload that sets a bound counts
	// the tasks already running; freed is closed, and replaced, whenever
	// one of them ends, waking starts that wait for their key's turn.
	running  map[string]int
	freed    chan struct{}
	unsynced map[*entry]struct{} // ended tasks whose final state the store has not taken yet
	closed   bool
}

type entry struct {
	t      Task
	cancel context.CancelCauseFunc // nil once finished
	// maxTurns bounds the task's loop: the service's bound or its key's,
	// whichever is lower, as they were when it started; limit names it.
	maxTurns int
	limit    string
	done     chan struct{}
	// hook hears of every event from the loop's goroutine (the starter's
	// own listener); subs are the followers (GET /agents/{id}/events).
	hook func(Event)
	subs map[*Subscription]struct{}

	// clock is the task's deadline, paused while it waits for an
	// approval; set by run before the loop starts, used by its observer
	// (the same goroutine).
	clock *taskDeadline

	// stored: the store has the task, so its lease may be renewed. A
	// task is in tasks before its first save ends; renewing it then would
	// find no row and take it for lost. Guarded by the manager's mu.
	stored bool

	saveMu  sync.Mutex      // orders snapshots and their writes
	events  int             // events numbered so far
	pending []NumberedEvent // events a SharedStore has not taken yet
}

var (
	errCanceledByRequest = errors.New("canceled by request")
	errWorkflowEnded     = errors.New("the workflow call ended")
	errLeaseLost         = errors.New("another replica took the task over")
)

// storeTimeout bounds one exchange with the store.
const storeTimeout = 10 * time.Second

// NewManager loads the tasks kept in opts.Dir. A task still marked running
// there was cut short by a stop or a crash: it is marked interrupted.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 1
	}
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = 25
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	store := opts.Store
	if store == nil {
		fs, err := NewFileTaskStore(opts.Dir, opts.Log, opts.Now)
		if err != nil {
			return nil, err
		}
		store = fs
	}
	parent := opts.Base
	if parent == nil {
		parent = context.Background()
	}
	base, stop := context.WithCancel(parent)
	m := &Manager{opts: opts, store: store, sem: make(chan struct{}, opts.MaxConcurrent), base: base, stop: stop,
		tasks: map[string]*entry{}, unsynced: map[*entry]struct{}{}, running: map[string]int{}, freed: make(chan struct{})}
	m.shared, _ = store.(SharedStore)
	if err := m.load(); err != nil {
		stop()
		return nil, err
	}
	if m.shared != nil {
		m.loop = make(chan struct{})
		go m.leaseLoop()
	}
	return m, nil
}

func (m *Manager) load() error {
	ctx, cancel := context.WithTimeout(m.base, storeTimeout)
	defer cancel()
	tasks, err := m.store.Load(ctx)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		e := &entry{t: t, done: make(chan struct{})}
		close(e.done)
		m.tasks[t.ID] = e
	}
	return nil
}

// Start begins a task in the background and returns it as it starts. It
// fails with ErrBusy when MaxConcurrent tasks are running, and with a
// KeyBusyError when the key's own bound of them are (KeyLimits).
func (m *Manager) Start(task, label string) (Task, error) {
	return m.StartWith(context.Background(), task, StartOptions{Label: label})
}

// StartOptions are the choices of StartWith.
type StartOptions struct {
	Label string
	// Queue waits for a free slot until ctx is done, instead of failing
	// with ErrBusy (a workflow's agents wait for each other this way).
	Queue bool
	// OnEvent hears of the task's turns, tool calls and end as they
	// happen, from the task's goroutine with the manager's lock held, so
	// that it sees them in order: it must not block or call the manager.
	OnEvent func(Event)
}

// StartWith begins a task in the background and returns it as it starts.
// ctx bounds only the wait for a slot; the task runs on its own deadline.
// The task belongs to the key of the tool call ctx is in (registry.Call's
// Key: spawn's, or a workflow's), and its own tool calls carry that key,
// so that work they start belongs to it too.
func (m *Manager) StartWith(ctx context.Context, task string, o StartOptions) (Task, error) {
	var owner string
	if c, ok := registry.CallFrom(ctx); ok {
		owner = c.Key
	}
	if len(task) > maxTaskChars {
		return Task{}, fmt.Errorf("the task is longer than %d characters", maxTaskChars)
	}
	maxRunning, maxTurns := 0, 0
	if m.opts.KeyLimits != nil {
		maxRunning, maxTurns = m.opts.KeyLimits(owner)
	}
	if err := m.acquire(ctx, owner, maxRunning, o.Queue); err != nil {
		return Task{}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.release(owner)
		return Task{}, ErrStopping
	}
	now := m.opts.Now().UTC()
	tctx, cancel := context.WithCancelCause(m.base)
	// The task's model calls and tool calls continue the trace of the
	// call that started it.
	tctx = tracing.Follow(tctx, ctx)
	e := &entry{
		t: Task{ID: newTaskID(), Label: m.opts.Redact(o.Label), Task: m.opts.Redact(task), Model: m.opts.ModelName, Status: StatusRunning,
			CreatedAt: now, UpdatedAt: now, ToolCalls: []CallRecord{}, Owner: owner},
		cancel: cancel, done: make(chan struct{}), hook: o.OnEvent, subs: map[*Subscription]struct{}{},
		maxTurns: m.opts.MaxTurns, limit: "TOOLSVC_AGENT_MAX_TURNS",
	}
	if maxTurns > 0 && maxTurns < e.maxTurns {
		e.maxTurns, e.limit = maxTurns, "the key's subagents.max_turns in TOOLSVC_POLICY_FILE"
	}
	m.tasks[e.t.ID] = e
	m.wg.Add(1)
	m.mu.Unlock()
	if err := m.save(e); err != nil {
		m.opts.Log.Error().Err(err).Str("agent", e.t.ID).Msg("agents: saving a task")
		if m.shared != nil {
			// Another replica could not answer for a task the store does
			// not have: it is not started.
			m.mu.Lock()
			delete(m.tasks, e.t.ID)
			m.mu.Unlock()
			cancel(nil)
			close(e.done)
			m.wg.Done()
			m.release(owner)
			return Task{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	m.mu.Lock()
	e.stored = true
	m.mu.Unlock()
	snap := m.snapshot(e)
	go m.run(tctx, e, task)
	return snap, nil
}

// acquire takes a slot for a task of owner: one of the key's maxRunning
// (0: no bound of its own), then one of the service's MaxConcurrent, in
// that order so that a key waiting for its own turn holds no slot of the
// service. With queue it waits for both until ctx is done; without, it
// fails at once with KeyBusyError or ErrBusy.
func (m *Manager) acquire(ctx context.Context, owner string, maxRunning int, queue bool) error {
	for {
		m.mu.Lock()
		if maxRunning <= 0 || m.running[owner] < maxRunning {
			m.running[owner]++
			m.mu.Unlock()
			break
		}
		freed := m.freed
		m.mu.Unlock()
		if !queue {
			return &KeyBusyError{Max: maxRunning}
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-m.base.Done():
			return ErrStopping
		}
	}
	if queue {
		select {
		case m.sem <- struct{}{}:
			return nil
		case <-ctx.Done():
			m.releaseKey(owner)
			return context.Cause(ctx)
		case <-m.base.Done():
			m.releaseKey(owner)
			return ErrStopping
		}
	}
	select {
	case m.sem <- struct{}{}:
		return nil
	default:
		m.releaseKey(owner)
		return ErrBusy
	}
}

// release gives back both slots acquire took.
func (m *Manager) release(owner string) {
	<-m.sem
	m.releaseKey(owner)
}

// releaseKey gives back the key's slot and wakes the starts waiting for
// one.
func (m *Manager) releaseKey(owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running[owner]--; m.running[owner] <= 0 {
		delete(m.running, owner)
	}
	close(m.freed)
	m.freed = make(chan struct{})
}

// run works on task (as given; the copy kept in e is redacted).
func (m *Manager) run(ctx context.Context, e *entry, task string) {
	// In this order: the slot is free before waiters hear of the end.
	defer m.wg.Done()
	defer close(e.done)
	defer m.release(e.t.Owner)
	tctx, cancelTimeout := withTaskDeadline(ctx, m.opts.Timeout)
	defer cancelTimeout()
	e.clock = tctx
	loop := &Loop{Model: m.opts.Model, Tools: m.opts.Tools, Allowed: m.allowed(), MaxTurns: e.maxTurns, Limit: e.limit, Key: e.t.Owner,
		Approvals: m.opts.Approvals}
	var out Outcome
	func() {
		defer func() {
			if p := recover(); p != nil {
				m.opts.Log.Error().Str("agent", e.t.ID).Str("panic", fmt.Sprint(p)).Msg("agents: sub-agent panicked")
				out = Outcome{Failure: &Failure{Code: FailModel, Message: "internal failure of the sub-agent; the operator can find the details in the service log"}}
			}
		}()
		out = loop.Run(tctx, e.t.ID, task, observer{m, e})
	}()
	now := m.opts.Now().UTC()
	m.mu.Lock()
	t := &e.t
	t.Answer = m.opts.Redact(out.Answer)
	t.Turns = max(t.Turns, out.Turns)
	t.Status = StatusCompleted
	t.Error = out.Failure
	t.Approval = nil
	switch {
	case errors.Is(context.Cause(ctx), errCanceledByRequest):
		t.Status, t.Error = StatusCanceled, &Failure{Code: FailCanceled, Message: "canceled by request (DELETE /agents/" + t.ID + ")"}
	case errors.Is(context.Cause(ctx), errLeaseLost):
		t.Status, t.Error = StatusInterrupted, &Failure{Code: FailInterrupted, Message: "this replica lost its hold on the task (it could not reach the database for longer than TOOLSVC_AGENT_LEASE) and another marked it interrupted; its work so far is in the tool calls"}
	case errors.Is(context.Cause(ctx), errWorkflowEnded):
		t.Status, t.Error = StatusCanceled, &Failure{Code: FailCanceled, Message: "stopped because the workflow call ended first (its deadline, or its client went away)"}
	case ctx.Err() != nil:
		t.Status, t.Error = StatusInterrupted, &Failure{Code: FailInterrupted, Message: "the service was shutting down; its work so far is in the tool calls"}
	case tctx.Err() != nil:
		t.Status, t.Error = StatusFailed, &Failure{Code: FailTimeout, Message: fmt.Sprintf("stopped after %s (TOOLSVC_AGENT_TIMEOUT, not counting time spent waiting for approvals) without a final answer", m.opts.Timeout)}
	case out.Failure != nil:
		t.Status = StatusFailed
	}
	if t.Error != nil {
		t.Error.Message = m.opts.Redact(t.Error.Message)
	}
	t.FinishedAt, t.UpdatedAt = &now, now
	e.cancel(nil)
	e.cancel = nil
	final := Event{Type: EventEnd, Agent: t.ID, Time: now, Turn: t.Turns, Status: t.Status, Answer: runes.Shorten(t.Answer, maxEventChars)}
	if t.Error != nil {
		final.Error = t.Error.Message
	}
	m.publishLocked(e, final)
	m.mu.Unlock()
	if err := m.save(e); err != nil {
		m.opts.Log.Error().Err(err).Str("agent", e.t.ID).Msg("agents: saving a task")
		if m.shared != nil {
			// Kept until the store takes it: the lease loop tries again.
			m.mu.Lock()
			m.unsynced[e] = struct{}{}
			m.mu.Unlock()
		}
	}
	ev := m.opts.Log.Info()
	if t.Status != StatusCompleted {
		ev = m.opts.Log.Warn()
	}
	ev.Str("agent", e.t.ID).Str("key", t.Owner).Str("status", t.Status).Int("turns", t.Turns).Int("tool_calls", t.CallCount).Msg("sub-agent finished")
}

// observer records a running task's progress and keeps the file current.
type observer struct {
	m *Manager
	e *entry
}

func (o observer) Turn(n int) {
	o.m.mu.Lock()
	now := o.m.opts.Now().UTC()
	o.e.t.Turns, o.e.t.UpdatedAt = n, now
	o.m.publishLocked(o.e, Event{Type: EventTurn, Agent: o.e.t.ID, Time: now, Turn: n})
	o.m.mu.Unlock()
	if err := o.m.save(o.e); err != nil {
		o.m.opts.Log.Error().Err(err).Str("agent", o.e.t.ID).Msg("agents: saving a task")
	}
}

// Text tells the task's followers a piece of the model's reply as it
// arrives; the task keeps only the whole answer.
func (o observer) Text(turn int, text string) {
	o.m.mu.Lock()
	o.m.publishLocked(o.e, Event{Type: EventText, Agent: o.e.t.ID, Time: o.m.opts.Now().UTC(), Turn: turn, Delta: o.m.opts.Redact(text)})
	o.m.mu.Unlock()
}

func (o observer) Called(name, args string, res registry.Result) {
	rec := CallRecord{Name: name, Arguments: runes.Shorten(o.m.opts.Redact(args), maxArgsChars), Status: res.Status, CallID: res.CallID, ApprovalID: res.ApprovalID}
	if res.Error != nil {
		rec.ErrorCode = res.Error.Code
	}
	o.m.mu.Lock()
	o.e.t.CallCount++
	if len(o.e.t.ToolCalls) < maxCallRecords {
		o.e.t.ToolCalls = append(o.e.t.ToolCalls, rec)
	}
	o.e.t.UpdatedAt = o.m.opts.Now().UTC()
	o.m.publishLocked(o.e, Event{Type: EventToolCall, Agent: o.e.t.ID, Time: o.e.t.UpdatedAt, Turn: o.e.t.Turns, Call: &rec})
	o.m.mu.Unlock()
	// Other replicas see the call at once; one process's file is
	// rewritten at the next turn.
	if o.m.shared != nil {
		if err := o.m.save(o.e); err != nil {
			o.m.opts.Log.Error().Err(err).Str("agent", o.e.t.ID).Msg("agents: saving a task")
		}
	}
}

// Waiting shows the task as waiting for the approval of the held call
// res, tells its followers, and stops its clock while a person decides.
func (o observer) Waiting(name, _ string, res registry.Result) {
	w := &ApprovalWait{ID: res.ApprovalID, Tool: name, Summary: o.m.opts.Redact(res.Summary), ExpiresAt: res.ExpiresAt}
	o.m.mu.Lock()
	now := o.m.opts.Now().UTC()
	o.e.t.Status, o.e.t.Approval, o.e.t.UpdatedAt = StatusWaitingApproval, w, now
	o.m.publishLocked(o.e, Event{Type: EventWaitingApproval, Agent: o.e.t.ID, Time: now, Turn: o.e.t.Turns, Approval: w})
	o.m.mu.Unlock()
	o.e.clock.pause()
	if err := o.m.save(o.e); err != nil {
		o.m.opts.Log.Error().Err(err).Str("agent", o.e.t.ID).Msg("agents: saving a task")
	}
	o.m.opts.Log.Info().Str("agent", o.e.t.ID).Str("key", o.e.t.Owner).Str("tool", name).Str("approval_id", res.ApprovalID).
		Msg("sub-agent waits for a person's approval")
}

// Resumed shows the task as running again, with what became of the
// approval, and starts its clock again.
func (o observer) Resumed(a approval.Approval, err error) {
	o.e.clock.resume()
	w := &ApprovalWait{ID: a.ID, Tool: a.Tool, Status: a.Status, DecidedBy: a.DecidedBy, Reason: o.m.opts.Redact(a.Reason)}
	if err != nil {
		w.Status, w.Error = "", "the approval could not be read: "+o.m.opts.Redact(err.Error())
	}
	o.m.mu.Lock()
	now := o.m.opts.Now().UTC()
	if o.e.t.Approval != nil {
		w.Tool, w.Summary = o.e.t.Approval.Tool, o.e.t.Approval.Summary
	}
	o.e.t.Status, o.e.t.Approval, o.e.t.UpdatedAt = StatusRunning, nil, now
	o.m.publishLocked(o.e, Event{Type: EventResumed, Agent: o.e.t.ID, Time: now, Turn: o.e.t.Turns, Approval: w})
	o.m.mu.Unlock()
	if err := o.m.save(o.e); err != nil {
		o.m.opts.Log.Error().Err(err).Str("agent", o.e.t.ID).Msg("agents: saving a task")
	}
}

// Model returns the model the sub-agents use.
func (m *Manager) Model() Chatter { return m.opts.Model }

// Get returns a task this process knows: one it started or, with a store
// of one process, loaded. Find asks a shared store for the others.
func (m *Manager) Get(id string) (Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.tasks[id]
	if !ok {
		return Task{}, false
	}
	return m.snapshotLocked(e), true
}

// Find returns a task, whichever replica runs it. The error says the
// shared store cannot be reached.
func (m *Manager) Find(ctx context.Context, id string) (Task, bool, error) {
	if t, ok := m.Get(id); ok || m.shared == nil {
		return t, ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	t, ok, err := m.shared.Get(ctx, id)
	if err != nil {
		return Task{}, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return t, ok, nil
}

// List returns every task, newest first: with a shared store, every
// replica's, this process's own as it knows them (fresher than the store).
func (m *Manager) List(ctx context.Context) ([]Summary, error) {
	var out []Summary
	if m.shared != nil {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		var err error
		if out, err = m.shared.List(sctx); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	m.mu.Lock()
	local := make(map[string]Summary, len(m.tasks))
	for _, e := range m.tasks {
		t := e.t
		local[t.ID] = Summary{ID: t.ID, Label: t.Label, Status: t.Status, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, FinishedAt: t.FinishedAt, Turns: t.Turns, Owner: t.Owner,
			Approval: copyWait(t.Approval)}
	}
	m.mu.Unlock()
	for i, s := range out {
		if l, ok := local[s.ID]; ok {
			out[i] = l
			delete(local, s.ID)
		}
	}
	if m.shared == nil {
		for _, l := range local {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	if out == nil {
		out = []Summary{}
	}
	return out, nil
}

// Wait blocks until the task ends or ctx is done, and returns it as it is.
func (m *Manager) Wait(ctx context.Context, id string) (Task, bool) {
	m.mu.Lock()
	e, ok := m.tasks[id]
	m.mu.Unlock()
	if !ok {
		if m.shared == nil {
			return Task{}, false
		}
		return m.waitRemote(ctx, id)
	}
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	return m.Get(id)
}

// Cancel stops a running task and waits for it to record its end. A task
// that already ended is returned as it is. Another replica's task is
// stopped by that replica, asked through the shared store.
func (m *Manager) Cancel(ctx context.Context, id string) (Task, bool, error) {
	m.mu.Lock()
	e, ok := m.tasks[id]
	if ok && e.cancel != nil {
		e.cancel(errCanceledByRequest)
	}
	m.mu.Unlock()
	if ok {
		t, ok := m.Wait(ctx, id)
		return t, ok, nil
	}
	if m.shared == nil {
		return Task{}, false, nil
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	_, err := m.shared.RequestCancel(sctx, id)
	cancel()
	if err != nil {
		return Task{}, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	t, ok := m.waitRemote(ctx, id)
	return t, ok, nil
}

// Close stops every running task (they are recorded as interrupted) and
// waits until they have, or until ctx is done.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		if m.loop != nil {
			<-m.loop
		}
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		m.opts.Log.Warn().Msg("agents: sub-agents still stopping at shutdown; they will be marked interrupted at the next start")
	}
}

func (m *Manager) snapshot(e *entry) Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshotLocked(e)
}

func (m *Manager) snapshotLocked(e *entry) Task {
	t := e.t
	t.ToolCalls = append([]CallRecord{}, e.t.ToolCalls...)
	if e.t.FinishedAt != nil {
		f := *e.t.FinishedAt
		t.FinishedAt = &f
	}
	if e.t.Error != nil {
		f := *e.t.Error
		t.Error = &f
	}
	t.Approval = copyWait(e.t.Approval)
	return t
}

func copyWait(w *ApprovalWait) *ApprovalWait {
	if w == nil {
		return nil
	}
	c := *w
	return &c
}

// save hands the task as it is now to the store, with the events the
// store has not taken yet. A task another replica took over is stopped.
func (m *Manager) save(e *entry) error {
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	m.mu.Lock()
	t := m.snapshotLocked(e)
	evs := append([]NumberedEvent(nil), e.pending...)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	err := m.store.Save(ctx, t, evs)
	if errors.Is(err, ErrLost) {
		m.mu.Lock()
		if e.cancel != nil {
			e.cancel(errLeaseLost)
		}
		m.mu.Unlock()
		m.opts.Log.Warn().Str("agent", t.ID).Msg("agents: another replica marked this task interrupted; stopping it")
		return nil
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	e.pending = e.pending[len(evs):]
	m.mu.Unlock()
	return nil
}

// ValidID reports whether id has the form of a task ID.
func ValidID(id string) bool { return idPattern().MatchString(id) }

func newTaskID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sa-" + hex.EncodeToString(b[:])
}

// allowed names the tools a sub-agent starting now may use: Allowed and
// what MoreAllowed adds.
func (m *Manager) allowed() []string {
	if m.opts.MoreAllowed == nil {
		return m.opts.Allowed
	}
	more := m.opts.MoreAllowed()
	if len(more) == 0 {
		return m.opts.Allowed
	}
	return append(append([]string(nil), m.opts.Allowed...), more...)
}
