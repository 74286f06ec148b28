package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
)

// Conversation bounds.
const (
	// ConversationTimeout is how long send_message waits for the agent's
	// reply, as CountBot's voice-device mode does.
	ConversationTimeout = 120 * time.Second
	maxHistoryMessages  = 20
	maxHistoryBytes     = 32 << 10
	maxConversations    = 1000 // session files kept; the least recent are removed at start
)

// ConversationPrompt is the system prompt of the conversation agent.
func ConversationPrompt(maxTurns int) string {
	return fmt.Sprintf(`You are the assistant behind a voice device: the user's words come from speech recognition, and your reply will be read aloud to them.
The earlier messages are your conversation with this user so far; use them to understand follow-up questions.
Use the tools you are given when the request needs them (file paths are relative to the workspace), in few steps: you have at most %d replies and about %d seconds.
Then reply without any tool call: briefly, in plain spoken sentences without Markdown, lists or code, in the user's language.`, maxTurns, int(ConversationTimeout/time.Second))
}

// ConversationOptions configure Conversations.
type ConversationOptions struct {
	// Store keeps the histories; nil: a file store in Dir.
	Store ConversationStore
	Dir   string // where the sessions' histories are kept without a Store; created if missing
	Model Chatter
	Tools Tools
	// Allowed names the tools of Tools the conversation agent may use;
	// nil: none. Never send_message itself, nor the tools that start
	// agents or reach the user's channels.
	Allowed       []string
	MaxTurns      int
	MaxConcurrent int
	// Timeout is how long one message may take; default ConversationTimeout.
	Timeout time.Duration
	Redact  func(string) string
	Log     zerolog.Logger
	Now     func() time.Time
}

// Conversations passes a user's words to an agent with the service's tools
// and returns its reply, keeping each session's recent history on disk so a
// follow-up question has its context.
type Conversations struct {
	opts  ConversationOptions
	store ConversationStore
	sem   chan struct{}
}

// ConversationStore keeps send_message's histories, one per owner and
// session, and hands each to one message at a time, across every
// replica that shares it.
type ConversationStore interface {
	// Hold waits, until ctx is done, for owner's conversation in session
	// to be free, and takes it.
	Hold(ctx context.Context, owner, session string) (SessionHold, error)
}

// SessionHold is a conversation taken for one message.
type SessionHold interface {
	// Messages is the history so far.
	Messages() []Message
	// Save replaces the history.
	Save(ctx context.Context, msgs []Message) error
	// Release frees the conversation for the next message.
	Release()
}

// FileConversations keeps each conversation in a file of its folder and
// serialises the messages of one within this process.
type FileConversations struct {
	dir    string
	log    zerolog.Logger
	redact func(string) string
	now    func() time.Time

	mu    sync.Mutex
	locks map[string]*sessionLock
}

type sessionLock struct {
	ch   chan struct{}
	refs int
}

// history is one session's file.
type history struct {
	SessionID string `json:"session_id"`
	// Owner is the name of the API key the conversation belongs to; empty
	// without keys (and in files of before keys had names).
	Owner     string    `json:"owner,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	Messages  []Message `json:"messages"`
}

// NewConversations prepares the history folder, removing the least recently
// used histories beyond maxConversations.
func NewConversations(o ConversationOptions) (*Conversations, error) {
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxTurns <= 0 {
		o.MaxTurns = 25
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = ConversationTimeout
	}
	c := &Conversations{opts: o, store: o.Store, sem: make(chan struct{}, o.MaxConcurrent)}
	if c.store == nil {
		fc, err := NewFileConversations(o.Dir, o.Log, o.Redact, o.Now)
		if err != nil {
			return nil, err
		}
		c.store = fc
	}
	return c, nil
}

// NewFileConversations prepares the history folder, removing the least
// recently used histories beyond maxConversations. redact cleans the
// session ID kept in each file.
func NewFileConversations(dir string, log zerolog.Logger, redact func(string) string, now func() time.Time) (*FileConversations, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("conversations folder: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) > maxConversations {
		type aged struct {
			path string
			mod  time.Time
		}
		var all []aged
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				all = append(all, aged{f, fi.ModTime()})
			}
		}
		sort.Slice(all, func(i, j int) bool { return all[i].mod.After(all[j].mod) })
		for _, a := range all[min(len(all), maxConversations):] {
			_ = os.Remove(a.path)
		}
	}
	return &FileConversations{dir: dir, log: log, redact: redact, now: now, locks: map[string]*sessionLock{}}, nil
}

// tools returns the names of the tools the conversation agent of the key
// named key may use now.
func (c *Conversations) tools(key string) []string {
	var out []string
	for _, d := range Restrict(c.opts.Tools.DefinitionsFor(key), c.opts.Allowed) {
		out = append(out, d.Function.Name)
	}
	return out
}

// ErrConversationTimeout is returned when the agent did not reply in time.
var ErrConversationTimeout = errors.New("no reply in time")

// Send passes text to the agent in session's conversation and returns its
// reply. An empty session has no history. Messages of one session are
// answered one at a time, in the order they come.
//
// A conversation belongs to owner, the name of the caller's API key (empty
// without keys): another key that names the same session gets a
// conversation of its own, and never sees, nor adds to, this one's
// history, just as if the session did not exist. The agent's tool calls
// carry owner too.
func (c *Conversations) Send(ctx context.Context, owner, session, text string, onEvent func(Event)) (Outcome, error) {
	select {
	case c.sem <- struct{}{}:
	default:
		return Outcome{}, ErrBusy
	}
	defer func() { <-c.sem }()
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var hold SessionHold
	var past []Message
	if session != "" {
		var err error
		if hold, err = c.store.Hold(ctx, owner, session); err != nil {
			if ctx.Err() != nil {
				return Outcome{}, ErrConversationTimeout
			}
			return Outcome{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer hold.Release()
		past = trimHistory(repairHistory(hold.Messages()))
	}
	loop := &Loop{Model: c.opts.Model, Tools: c.opts.Tools, Allowed: c.tools(owner), MaxTurns: c.opts.MaxTurns,
		System: ConversationPrompt(c.opts.MaxTurns), Source: "send_message", Key: owner}
	id := session
	if id == "" {
		id = "send_message"
	}
	out := loop.Continue(ctx, id, past, text, eventObserver{id: id, fn: onEvent})
	out.Answer = c.opts.Redact(out.Answer)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return out, ErrConversationTimeout
	case ctx.Err() != nil:
		return out, ctx.Err()
	case out.Failure != nil:
		return out, errors.New(c.opts.Redact(out.Failure.Message))
	}
	// An empty answer is not kept: an assistant message without content
	// or tool calls is refused by Mistral ("must have either content or
	// tool_calls, but not none"), so it would break every later turn.
	if hold != nil && strings.TrimSpace(out.Answer) != "" {
		msgs := append(past, Message{Role: "user", Content: c.opts.Redact(text)}, Message{Role: "assistant", Content: out.Answer})
		// The reply stands even if it cannot be kept; the next message
		// then lacks this exchange.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := hold.Save(sctx, trimHistory(msgs))
		cancel()
		if err != nil {
			c.opts.Log.Error().Err(err).Msg("send_message: saving the conversation")
		}
	}
	return out, nil
}

// repairHistory keeps the exchanges of a history that every provider
// accepts back: a user message with text followed by an assistant message
// with text. Anything else (an empty answer kept by an older version, a
// user message whose answer failed, a role out of place, a hand-edited
// file) is dropped, so that a conversation that once went wrong is not
// refused for good.
func repairHistory(msgs []Message) []Message {
	var out []Message
	for i := 0; i+1 < len(msgs); i++ {
		u, a := msgs[i], msgs[i+1]
		if u.Role != "user" || a.Role != "assistant" || strings.TrimSpace(u.Content) == "" || strings.TrimSpace(a.Content) == "" {
			continue
		}
		out = append(out, Message{Role: "user", Content: u.Content}, Message{Role: "assistant", Content: a.Content})
		i++
	}
	return out
}

// trimHistory keeps the most recent messages within maxHistoryMessages and
// maxHistoryBytes, starting with a user message.
func trimHistory(msgs []Message) []Message {
	size := 0
	start := len(msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		size += len(msgs[i].Content)
		if len(msgs)-i > maxHistoryMessages || size > maxHistoryBytes {
			break
		}
		start = i
	}
	for start < len(msgs) && msgs[start].Role != "user" {
		start++
	}
	return append([]Message(nil), msgs[start:]...)
}

// fileHold is a conversation of FileConversations, taken.
type fileHold struct {
	c       *FileConversations
	file    string
	owner   string
	session string
	h       history
	unlock  func()
}

// Hold takes owner's conversation in session within this process.
func (c *FileConversations) Hold(ctx context.Context, owner, session string) (SessionHold, error) {
	file := conversationFile(owner, session)
	unlock, err := c.lock(ctx, file)
	if err != nil {
		return nil, err
	}
	return &fileHold{c: c, file: file, owner: owner, session: session, h: c.load(file, owner), unlock: unlock}, nil
}

func (h *fileHold) Messages() []Message { return h.h.Messages }

func (h *fileHold) Save(_ context.Context, msgs []Message) error {
	hist := history{SessionID: h.c.redact(h.session), Owner: h.owner, UpdatedAt: h.c.now().UTC(), Messages: msgs}
	return h.c.save(h.file, hist)
}

func (h *fileHold) Release() { h.unlock() }

// lock takes the conversation kept in file, for one message at a time.
func (c *FileConversations) lock(ctx context.Context, file string) (func(), error) {
	c.mu.Lock()
	l := c.locks[file]
	if l == nil {
		l = &sessionLock{ch: make(chan struct{}, 1)}
		c.locks[file] = l
	}
	l.refs++
	c.mu.Unlock()
	release := func() {
		c.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(c.locks, file)
		}
		c.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// SessionFile is the file name a session's history is kept under: the
// session ID's safe characters (at most 40), then a hash of the whole ID,
// so that any ID gives a name inside the folder and distinct IDs distinct
// names.
func SessionFile(session string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return -1
	}, session)
	if len(safe) > 40 {
		safe = safe[:40]
	}
	sum := sha256.Sum256([]byte(session))
	return safe + "-" + hex.EncodeToString(sum[:8]) + ".json"
}

// conversationFile is the file owner's conversation in session is kept
// under. Without an owner it is SessionFile(session), the name of before
// keys had names, so those histories keep loading; with one, the hash
// covers the owner too, so two keys' conversations in one session are two
// files.
func conversationFile(owner, session string) string {
	if owner == "" {
		return SessionFile(session)
	}
	name := SessionFile(session)
	safe := name[:strings.LastIndexByte(name, '-')]
	sum := sha256.Sum256([]byte(owner + "\x00" + session))
	return safe + "-" + hex.EncodeToString(sum[:8]) + ".json"
}

// load reads the history kept in file, if it is owner's.
func (c *FileConversations) load(file, owner string) history {
	var h history
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return h
	}
	if err := json.Unmarshal(data, &h); err != nil {
		c.log.Warn().Str("file", file).Msg("send_message: a conversation file cannot be read; starting afresh")
		return history{}
	}
	if h.Owner != owner {
		// Names differ by a hash of the owner; this holds even if two
		// ever met.
		return history{}
	}
	h.Messages = trimHistory(repairHistory(h.Messages))
	return h
}

// save writes the history atomically: a temporary file, synced, renamed.
func (c *FileConversations) save(file string, h history) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(c.dir, file, data)
}

func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-"+strings.TrimSuffix(name, ".json")+"-*")
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
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// eventObserver turns a loop's progress into events for fn.
type eventObserver struct {
	id string
	fn func(Event)
}

func (o eventObserver) Turn(n int) {
	if o.fn != nil {
		o.fn(Event{Type: EventTurn, Agent: o.id, Time: time.Now().UTC(), Turn: n})
	}
}

func (o eventObserver) Called(name, args string, res registry.Result) {
	if o.fn == nil {
		return
	}
	rec := CallRecord{Name: name, Arguments: runes.Shorten(args, maxArgsChars), Status: res.Status, CallID: res.CallID}
	if res.Error != nil {
		rec.ErrorCode = res.Error.Code
	}
	o.fn(Event{Type: EventToolCall, Agent: o.id, Time: time.Now().UTC(), Call: &rec})
}

var _ ConversationStore = (*FileConversations)(nil)
