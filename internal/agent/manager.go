package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
)

// Task statuses.
const (
	StatusRunning     = "running"
	StatusCompleted   = "completed"
	StatusFailed      = "failed"
	StatusCanceled    = "canceled"
	StatusInterrupted = "interrupted"
)

// CallRecord is one tool call a sub-agent made, for GET /agents/{id}.
type CallRecord struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // cut to maxArgsChars
	Status    string `json:"status"`
	ErrorCode string `json:"error_code,omitempty"`
	CallID    string `json:"call_id,omitempty"` // the audit record's call ID
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
}

const (
	maxArgsChars   = 200  // arguments kept per call record
	maxCallRecords = 500  // call records kept per task; CallCount keeps counting
	maxKeptTasks   = 1000 // finished task files kept; older ones are removed at start
	maxTaskChars   = 100_000
)

// ErrBusy is returned by Start when MaxConcurrent sub-agents are running.
var ErrBusy = errors.New("too many sub-agents running")

// ErrStopping is returned by Start once Close has begun.
var ErrStopping = errors.New("the service is shutting down")

var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sa-[0-9a-f]{12}$`) })

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Base, when set, stops every running task when it is done (shutdown).
	Base          context.Context
	Dir           string // where task files live; created if missing
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
}

// Manager starts sub-agents, keeps their tasks on disk and answers for them.
type Manager struct {
	opts ManagerOptions
	sem  chan struct{}
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	saveMu sync.Mutex // orders snapshots and their writes
	mu     sync.Mutex
	tasks  map[string]*entry
	closed bool
}

type entry struct {
	t      Task
	cancel context.CancelCauseFunc // nil once finished
	done   chan struct{}
	// hook hears of every event from the loop's goroutine (the starter's
	// own listener); subs are the followers (GET /agents/{id}/events).
	hook func(Event)
	subs map[*Subscription]struct{}
}

var (
	errCanceledByRequest = errors.New("canceled by request")
	errWorkflowEnded     = errors.New("the workflow call ended")
)

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
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("agents folder: %w", err)
	}
	parent := opts.Base
	if parent == nil {
		parent = context.Background()
	}
	base, stop := context.WithCancel(parent)
	m := &Manager{opts: opts, sem: make(chan struct{}, opts.MaxConcurrent), base: base, stop: stop, tasks: map[string]*entry{}}
	if err := m.load(); err != nil {
		stop()
		return nil, err
	}
	return m, nil
}

func (m *Manager) load() error {
	files, err := filepath.Glob(filepath.Join(m.opts.Dir, "sa-*.json"))
	if err != nil {
		return err
	}
	var all []*entry
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("agents folder: %w", err)
		}
		var t Task
		if err := json.Unmarshal(data, &t); err != nil || !idPattern().MatchString(t.ID) || filepath.Base(f) != t.ID+".json" {
			m.opts.Log.Warn().Str("file", f).Msg("agents: skipping a task file that cannot be read")
			continue
		}
		e := &entry{t: t, done: make(chan struct{})}
		close(e.done)
		all = append(all, e)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].t.CreatedAt.After(all[j].t.CreatedAt) })
	for i, e := range all {
		if i >= maxKeptTasks {
			_ = os.Remove(filepath.Join(m.opts.Dir, e.t.ID+".json"))
			continue
		}
		m.tasks[e.t.ID] = e
		if e.t.Status == StatusRunning {
			now := m.opts.Now().UTC()
			e.t.Status, e.t.FinishedAt, e.t.UpdatedAt = StatusInterrupted, &now, now
			e.t.Error = &Failure{Code: FailInterrupted, Message: "the service stopped while the task was running; its work so far is in the tool calls. Next: spawn it again if it is still needed."}
			if err := m.save(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Start begins a task in the background and returns it as it starts. It
// fails with ErrBusy when MaxConcurrent tasks are running.
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
	if o.Queue {
		select {
		case m.sem <- struct{}{}:
		case <-ctx.Done():
			return Task{}, context.Cause(ctx)
		case <-m.base.Done():
			return Task{}, ErrStopping
		}
	} else {
		select {
		case m.sem <- struct{}{}:
		default:
			return Task{}, ErrBusy
		}
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		<-m.sem
		return Task{}, ErrStopping
	}
	now := m.opts.Now().UTC()
	tctx, cancel := context.WithCancelCause(m.base)
	e := &entry{
		t: Task{ID: newTaskID(), Label: m.opts.Redact(o.Label), Task: m.opts.Redact(task), Model: m.opts.ModelName, Status: StatusRunning,
			CreatedAt: now, UpdatedAt: now, ToolCalls: []CallRecord{}, Owner: owner},
		cancel: cancel, done: make(chan struct{}), hook: o.OnEvent, subs: map[*Subscription]struct{}{},
	}
	m.tasks[e.t.ID] = e
	m.wg.Add(1)
	m.mu.Unlock()
	if err := m.save(e); err != nil {
		m.opts.Log.Error().Err(err).Str("agent", e.t.ID).Msg("agents: saving a task")
	}
	snap := m.snapshot(e)
	go m.run(tctx, e, task)
	return snap, nil
}

// run works on task (as given; the copy kept in e is redacted).
func (m *Manager) run(ctx context.Context, e *entry, task string) {
	// In this order: the slot is free before waiters hear of the end.
	defer m.wg.Done()
	defer close(e.done)
	defer func() { <-m.sem }()
	tctx, cancelTimeout := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancelTimeout()
	loop := &Loop{Model: m.opts.Model, Tools: m.opts.Tools, Allowed: m.allowed(), MaxTurns: m.opts.MaxTurns, Key: e.t.Owner}
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
	switch {
	case errors.Is(context.Cause(ctx), errCanceledByRequest):
		t.Status, t.Error = StatusCanceled, &Failure{Code: FailCanceled, Message: "canceled by request (DELETE /agents/" + t.ID + ")"}
	case errors.Is(context.Cause(ctx), errWorkflowEnded):
		t.Status, t.Error = StatusCanceled, &Failure{Code: FailCanceled, Message: "stopped because the workflow call ended first (its deadline, or its client went away)"}
	case ctx.Err() != nil:
		t.Status, t.Error = StatusInterrupted, &Failure{Code: FailInterrupted, Message: "the service was shutting down; its work so far is in the tool calls"}
	case tctx.Err() != nil:
		t.Status, t.Error = StatusFailed, &Failure{Code: FailTimeout, Message: fmt.Sprintf("stopped after %s (TOOLSVC_AGENT_TIMEOUT) without a final answer", m.opts.Timeout)}
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

func (o observer) Called(name, args string, res registry.Result) {
	rec := CallRecord{Name: name, Arguments: runes.Shorten(o.m.opts.Redact(args), maxArgsChars), Status: res.Status, CallID: res.CallID}
	if res.Error != nil {
		rec.ErrorCode = res.Error.Code
	}
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	o.e.t.CallCount++
	if len(o.e.t.ToolCalls) < maxCallRecords {
		o.e.t.ToolCalls = append(o.e.t.ToolCalls, rec)
	}
	o.e.t.UpdatedAt = o.m.opts.Now().UTC()
	o.m.publishLocked(o.e, Event{Type: EventToolCall, Agent: o.e.t.ID, Time: o.e.t.UpdatedAt, Turn: o.e.t.Turns, Call: &rec})
}

// Model returns the model the sub-agents use.
func (m *Manager) Model() Chatter { return m.opts.Model }

// Get returns a task.
func (m *Manager) Get(id string) (Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.tasks[id]
	if !ok {
		return Task{}, false
	}
	return m.snapshotLocked(e), true
}

// List returns every task, newest first.
func (m *Manager) List() []Summary {
	m.mu.Lock()
	out := make([]Summary, 0, len(m.tasks))
	for _, e := range m.tasks {
		t := e.t
		out = append(out, Summary{ID: t.ID, Label: t.Label, Status: t.Status, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, FinishedAt: t.FinishedAt, Turns: t.Turns, Owner: t.Owner})
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Wait blocks until the task ends or ctx is done, and returns it as it is.
func (m *Manager) Wait(ctx context.Context, id string) (Task, bool) {
	m.mu.Lock()
	e, ok := m.tasks[id]
	m.mu.Unlock()
	if !ok {
		return Task{}, false
	}
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	return m.Get(id)
}

// Cancel stops a running task and waits for it to record its end. A task
// that already ended is returned as it is.
func (m *Manager) Cancel(ctx context.Context, id string) (Task, bool) {
	m.mu.Lock()
	e, ok := m.tasks[id]
	if ok && e.cancel != nil {
		e.cancel(errCanceledByRequest)
	}
	m.mu.Unlock()
	if !ok {
		return Task{}, false
	}
	return m.Wait(ctx, id)
}

// Close stops every running task (they are recorded as interrupted) and
// waits until they have, or until ctx is done.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
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
	return t
}

// save writes the task's file atomically: a temporary file in the same
// folder, synced, then renamed over the old one.
func (m *Manager) save(e *entry) error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	t := m.snapshot(e)
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(m.opts.Dir, ".tmp-"+t.ID+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(m.opts.Dir, t.ID+".json"))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
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
