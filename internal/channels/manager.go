// Package channels sends files and a caption to the chat a session belongs
// to: Feishu/Lark, QQ, DingTalk, WeCom, Telegram, Discord, Slack and a
// generic webhook. One file per channel; this one holds what they share:
// the Manager (senders by channel and account), the session to target
// parsing, the file types, the HTTP exchange with its rate-limit retries and
// redirect refusal, and the token cache.
package channels

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/runes"
)

// MaxFileSize is the largest file any channel is handed.
const MaxFileSize = 20 << 20

// DefaultAccount is the account a session without one uses.
const DefaultAccount = "default"

// Kind is what a chat shows a file as.
type Kind int

// The kinds of file.
const (
	Document Kind = iota
	Image
	Video
	Audio
)

func (k Kind) String() string {
	switch k {
	case Image:
		return "image"
	case Video:
		return "video"
	case Audio:
		return "audio"
	}
	return "document"
}

// types is the list of file types send_media accepts, by extension.
var types = map[string]Kind{
	"png": Image, "jpg": Image, "jpeg": Image, "gif": Image, "bmp": Image, "webp": Image,
	"pdf": Document, "doc": Document, "docx": Document, "xls": Document, "xlsx": Document,
	"ppt": Document, "pptx": Document, "txt": Document,
	"zip": Document, "rar": Document, "7z": Document,
	"mp3": Audio, "mp4": Video, "avi": Video, "mov": Video,
	"json": Document, "xml": Document, "csv": Document, "md": Document,
}

// Types lists the accepted extensions, sorted.
func Types() []string {
	out := make([]string, 0, len(types))
	for e := range types {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// KindOf returns the kind and lower-case extension of a file name, and
// false when the type is not accepted.
func KindOf(name string) (Kind, string, bool) {
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(name), "."))
	k, ok := types[ext]
	return k, ext, ok
}

// contentTypes are the MIME types sent with uploads.
var contentTypes = map[string]string{
	"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "bmp": "image/bmp",
	"webp": "image/webp", "pdf": "application/pdf", "txt": "text/plain; charset=utf-8", "json": "application/json",
	"xml": "application/xml", "csv": "text/csv", "md": "text/markdown; charset=utf-8", "zip": "application/zip",
	"mp3": "audio/mpeg", "mp4": "video/mp4", "mov": "video/quicktime", "avi": "video/x-msvideo",
	"doc": "application/msword", "xls": "application/vnd.ms-excel", "ppt": "application/vnd.ms-powerpoint",
	"docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}

// File is one file to send. Content is read from offset 0 for each
// attempt, so a retried upload streams the file again instead of holding it
// in memory; no more than Size bytes are ever read.
type File struct {
	Name    string // base name the chat shows
	Ext     string // lower case, without the dot
	Kind    Kind
	Size    int64
	Content io.ReaderAt
	// Path is the file's workspace path, for channels that hand the
	// platform a link to the file (Options.Links) instead of its bytes;
	// "" when it has none.
	Path string
	// Folder is the key's own folder Path lies in (see
	// workspace.Folder); "": the whole workspace.
	Folder string
}

// NewFile describes a file of an accepted type; ok is false for another type.
func NewFile(name string, size int64, content io.ReaderAt) (*File, bool) {
	k, ext, ok := KindOf(name)
	if !ok {
		return nil, false
	}
	return &File{Name: path.Base(name), Ext: ext, Kind: k, Size: size, Content: content}, true
}

// reader returns a fresh reader of the whole file.
func (f *File) reader() io.Reader { return io.NewSectionReader(f.Content, 0, f.Size) }

func (f *File) contentType() string {
	if ct, ok := contentTypes[f.Ext]; ok {
		return ct
	}
	return "application/octet-stream"
}

// Message is what one send_media call delivers.
type Message struct {
	Session string // the session ID, for channels that pass it on (webhook)
	Target  Target
	Caption string
	Files   []*File
	// ReplyTo is the platform's ID of the message being answered
	// (X-Reply-To), or "": channels that can thread a reply under it do.
	ReplyTo string
}

// Outcome says how each part of a Message went: nil is sent.
type Outcome struct {
	Caption error   // nil also when there was no caption to send
	Files   []error // one per Message.Files
	// Notes are what the platform said of parts that were delivered but
	// not wholly: one line each, naming the part ("message", or the
	// file's name), who did not get it and what to do. Such a part
	// counts as sent.
	Notes []string
}

// Sender delivers messages to one account of one channel.
type Sender interface {
	// Check returns why f cannot go through this channel (its type or its
	// size is beyond what the channel takes), or "" when it can.
	Check(f *File) string
	// Send delivers m's caption and files to m.Target.ChatID. Files that
	// failed Check are not passed.
	Send(ctx context.Context, m *Message) Outcome
}

// Target is where a message goes.
type Target struct {
	Channel string
	Account string
	ChatID  string
}

// Manager holds the configured senders by channel and account.
type Manager struct {
	senders map[string]map[string]Sender
}

// NewManager returns an empty Manager; Add fills it.
func NewManager() *Manager { return &Manager{senders: map[string]map[string]Sender{}} }

// Add configures account of channel. An empty account is DefaultAccount.
func (m *Manager) Add(channel, account string, s Sender) {
	if account == "" {
		account = DefaultAccount
	}
	if m.senders[channel] == nil {
		m.senders[channel] = map[string]Sender{}
	}
	m.senders[channel][account] = s
}

// Empty reports whether no channel is configured.
func (m *Manager) Empty() bool { return m == nil || len(m.senders) == 0 }

// Channels lists the configured channels, sorted.
func (m *Manager) Channels() []string {
	var out []string
	for c := range m.senders {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Known lists every channel this package can send to.
var Known = []string{"dingtalk", "discord", "feishu", "qq", "slack", "telegram", "webhook", "wecom"}

// aliases are other names CountBot and its users give channels.
var aliases = map[string]string{"lark": "feishu", "wechat_work": "wecom", "wework": "wecom", "weixin_work": "wecom", "ding": "dingtalk"}

func canonical(ch string) string {
	ch = strings.ToLower(strings.TrimSpace(ch))
	if a, ok := aliases[ch]; ok {
		return a
	}
	return ch
}

// ErrNoChannel means the session belongs to no chat channel (the web UI,
// the API, a CLI): there is nowhere to send to.
var ErrNoChannel = errors.New("the session belongs to no chat channel")

// ParseTarget finds the chat a call belongs to. Explicit channel and chat
// (X-Channel and X-Chat-ID) win; the channel may name an account as
// "channel:account". Otherwise the session ID is read in CountBot's form
// "{channel}:{account}:{chat_id}:{ts}", also without the timestamp
// ("{channel}:{account}:{chat_id}", when the account is a configured one)
// or the account ("{channel}:{chat_id}" and "{channel}:{chat_id}:{ts}").
// A session whose first part is no known channel returns ErrNoChannel.
func ParseTarget(session, channel, chat string, accounts func(channel string) []string) (Target, error) {
	if channel != "" || chat != "" {
		// A chat ID may be left out for channels whose account is bound to
		// one chat (a WeCom group robot, a Discord webhook, our webhook);
		// the others report the missing chat when they send.
		ch, acct, _ := strings.Cut(channel, ":")
		ch = canonical(ch)
		switch {
		case ch == "":
			return Target{}, errors.New("X-Chat-ID needs X-Channel (e.g. feishu) beside it")
		case !slices.Contains(Known, ch):
			return Target{}, fmt.Errorf("%w: X-Channel %q is not one of %s", ErrNoChannel, ch, strings.Join(Known, ", "))
		}
		return Target{Channel: ch, Account: acct, ChatID: chat}, nil
	}
	parts := strings.Split(session, ":")
	if len(parts) < 2 || !slices.Contains(Known, canonical(parts[0])) {
		return Target{}, ErrNoChannel
	}
	t := Target{Channel: canonical(parts[0])}
	isTS := func(s string) bool {
		_, err := strconv.ParseFloat(s, 64)
		return err == nil && len(s) >= 9
	}
	rest := parts[1:]
	switch {
	case len(rest) >= 3:
		// {account}:{chat_id}:{ts}; a chat ID with colons keeps them.
		t.Account, t.ChatID = rest[0], strings.Join(rest[1:len(rest)-1], ":")
		if !isTS(rest[len(rest)-1]) {
			t.ChatID = strings.Join(rest[1:], ":")
		}
	case len(rest) == 2:
		if accounts != nil && slices.Contains(accounts(t.Channel), rest[0]) {
			t.Account, t.ChatID = rest[0], rest[1]
		} else if isTS(rest[1]) {
			t.ChatID = rest[0]
		} else {
			t.Account, t.ChatID = rest[0], rest[1]
		}
	default:
		t.ChatID = rest[0]
	}
	if t.ChatID == "" {
		return Target{}, fmt.Errorf("session %q names channel %s but no chat", session, t.Channel)
	}
	return t, nil
}

// Accounts lists the configured accounts of channel, sorted.
func (m *Manager) Accounts(channel string) []string {
	var out []string
	for a := range m.senders[canonical(channel)] {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// Sender returns the sender for t. An empty account is the default one, or
// the only one when the channel has just one.
func (m *Manager) Sender(t Target) (Sender, Target, error) {
	accts := m.senders[t.Channel]
	if len(accts) == 0 {
		return nil, t, fmt.Errorf("channel %s is not configured in this service (configured: %s)", t.Channel, strings.Join(m.Channels(), ", "))
	}
	if t.Account == "" {
		if _, ok := accts[DefaultAccount]; ok || len(accts) != 1 {
			t.Account = DefaultAccount
		} else {
			for a := range accts {
				t.Account = a
			}
		}
	}
	s, ok := accts[t.Account]
	if !ok {
		return nil, t, fmt.Errorf("channel %s has no account %q (configured: %s)", t.Channel, t.Account, strings.Join(m.Accounts(t.Channel), ", "))
	}
	return s, t, nil
}

// Linker makes the file at path (in the key's own folder, when it has one)
// reachable at a public URL for a while, without a key.
type Linker interface {
	URL(folder, path string) (string, error)
}

// Options are what every sender shares.
type Options struct {
	// Links, when set, makes a workspace file reachable at a public URL
	// for a while, for platforms that fetch media by URL (QQ).
	Links Linker

	// Client makes the requests; nil: one with a 30 s response-header
	// timeout. Redirects are never followed, whatever the client says:
	// a token in a header or URL must not reach another host.
	Client *http.Client
	// Now and Sleep are injectable for tests; Sleep waits out a rate
	// limit and returns early with ctx's error.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Version is the service's version, named in every request's
	// User-Agent ("devel" when empty).
	Version string
}

// ProjectURL is the address the User-Agent names, as Discord asks.
const ProjectURL = "https://github.com/countbot/toolsvc"

// userAgent is what a request of channel says it comes from: Discord
// documents "DiscordBot ($url, $versionNumber)"
// (https://discord.com/developers/docs/reference#user-agent) and refuses
// other forms; every other platform gets toolsvc's name and version.
func userAgent(channel, version string) string {
	if version == "" {
		version = "devel"
	}
	if channel == "discord" {
		return "DiscordBot (" + ProjectURL + ", " + version + ")"
	}
	return "toolsvc/" + version + " (+" + ProjectURL + ")"
}

func (o Options) withDefaults() Options {
	var c http.Client
	if o.Client != nil {
		c = *o.Client
	} else {
		c.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: 30 * time.Second, TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 4}
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	o.Client = &c
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return o
}

// maxReply bounds a reply body read into memory; every API here answers
// with a small JSON object.
const maxReply = 1 << 20

// maxAttempts bounds the tries of one request under rate limiting.
const maxAttempts = 4

// reply is an API's answer, body read.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// api makes the requests of one sender.
type api struct {
	name string // the channel, for messages
	o    Options
	// limited recognizes a rate-limit reply beyond a plain 429 with
	// Retry-After, and returns the wait it asks for.
	limited func(r *reply) (time.Duration, bool)
}

// APIError is a refusal by a channel's API.
type APIError struct {
	Channel string
	Status  int
	Msg     string
}

func (e *APIError) Error() string {
	if e.Status != 0 && e.Status != http.StatusOK {
		return fmt.Sprintf("%s refused it (HTTP %d): %s", e.Channel, e.Status, e.Msg)
	}
	return fmt.Sprintf("%s refused it: %s", e.Channel, e.Msg)
}

func (a *api) errorf(status int, format string, args ...any) error {
	return &APIError{Channel: a.name, Status: status, Msg: runes.Shorten(strings.TrimSpace(fmt.Sprintf(format, args...)), 300)}
}

// do sends the request build makes (anew for each attempt, so a streamed
// body streams again), waiting out rate limits within ctx's deadline.
// check, when not nil, turns a reply the API refused into an error.
func (a *api) do(ctx context.Context, build func(ctx context.Context) (*http.Request, error), check func(r *reply) error) (*reply, error) {
	for attempt := 1; ; attempt++ {
		req, err := build(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("User-Agent", userAgent(a.name, a.o.Version))
		resp, err := a.o.Client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: stopped before the channel answered: %w", a.name, ctx.Err())
			}
			// The URL in a *url.Error may carry a token (Telegram's path,
			// WeCom's key): only the cause is kept.
			var ue interface{ Unwrap() error }
			if errors.As(err, &ue) && ue.Unwrap() != nil {
				err = ue.Unwrap()
			}
			return nil, fmt.Errorf("%s could not be reached: %v", a.name, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: reading its answer: %v", a.name, err)
		}
		r := &reply{Status: resp.StatusCode, Header: resp.Header, Body: body}
		if r.Status >= 300 && r.Status < 400 {
			return nil, a.errorf(r.Status, "it answered with a redirect, which is not followed (a token must not reach another host); check the channel's base URL")
		}
		var wait time.Duration
		limited := false
		if a.limited != nil {
			wait, limited = a.limited(r)
		}
		if !limited {
			wait, limited = retryAfter(r, a.o.Now())
		}
		if !limited {
			if check != nil {
				if err := check(r); err != nil {
					return r, err
				}
			}
			return r, nil
		}
		if attempt == maxAttempts {
			return nil, a.errorf(r.Status, "rate limited %d times in a row. Next: send fewer files at once, or try again later", attempt)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, a.errorf(r.Status, "rate limited; it asks to wait %s, more than the call has left. Next: try again in %s", wait.Round(time.Second), wait.Round(time.Second))
		}
		if err := a.o.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s: stopped while waiting out a rate limit: %w", a.name, err)
		}
	}
}

// retryAfter reads a 429's Retry-After (seconds or a date); a 429 without
// one waits a second.
func retryAfter(r *reply, now time.Time) (time.Duration, bool) {
	if r.Status != http.StatusTooManyRequests {
		return 0, false
	}
	return hint(r.Header.Get("Retry-After"), now), true
}

func hint(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Second
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return capWait(time.Duration(s * float64(time.Second)))
	}
	if t, err := http.ParseTime(v); err == nil {
		return capWait(t.Sub(now))
	}
	return time.Second
}

// capWait keeps a wait between nothing and ten minutes.
func capWait(d time.Duration) time.Duration {
	return min(max(d, 0), 10*time.Minute)
}

// tokenCache holds an access token and fetches a new one shortly before it
// expires (the last fifth of its life, at most five minutes early), so a
// request never goes out with a token about to lapse.
type tokenCache struct {
	mu    sync.Mutex
	tok   string
	renew time.Time
	now   func() time.Time
	fetch func(ctx context.Context) (string, time.Duration, error)
}

func (c *tokenCache) get(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok != "" && c.now().Before(c.renew) {
		return c.tok, nil
	}
	tok, ttl, err := c.fetch(ctx)
	if err != nil {
		return "", err
	}
	if tok == "" {
		return "", errors.New("the token endpoint returned no token")
	}
	early := min(ttl/5, 5*time.Minute)
	c.tok, c.renew = tok, c.now().Add(ttl-early)
	return tok, nil
}

// drop forgets tok after the API called it invalid, so the next get
// fetches a fresh one.
func (c *tokenCache) drop(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == tok {
		c.tok = ""
	}
}

// sendCaptioned sends each file with its own request, the caption with
// the first one; when that one fails, or there is no file, the caption goes
// alone as a text message.
func sendCaptioned(ctx context.Context, m *Message, text func(ctx context.Context, s string) error, file func(ctx context.Context, f *File, caption string) error) Outcome {
	var out Outcome
	caption := strings.TrimSpace(m.Caption) != ""
	for i, f := range m.Files {
		c := ""
		if i == 0 && caption {
			c = m.Caption
		}
		out.Files = append(out.Files, file(ctx, f, c))
	}
	if caption && (len(m.Files) == 0 || out.Files[0] != nil) {
		out.Caption = text(ctx, m.Caption)
	}
	return out
}

// sendEach runs one send per file, and the caption first as its own
// message, for channels whose messages hold one file and no text.
func sendEach(ctx context.Context, m *Message, text func(ctx context.Context, s string) error, file func(ctx context.Context, f *File) error) Outcome {
	var out Outcome
	if strings.TrimSpace(m.Caption) != "" {
		out.Caption = text(ctx, m.Caption)
	}
	for _, f := range m.Files {
		out.Files = append(out.Files, file(ctx, f))
	}
	return out
}

// CheckFile returns why f cannot go through s, or "" when it can: what
// no platform takes (an empty file: Slack, Feishu, WeCom and the others
// refuse one after the upload has begun), then the channel's own limits.
// Every file is checked before anything is uploaded.
func CheckFile(s Sender, f *File) string {
	if f.Size == 0 {
		return "chat platforms refuse empty files. Next: check that the file was written completely, or leave it out"
	}
	return s.Check(f)
}

// limitFor returns "" when f is within limit bytes, else the reason.
func limitFor(channel string, f *File, limit int64, what string) string {
	if f.Size > limit {
		return fmt.Sprintf("%s takes %s of at most %s", channel, what, mb(limit))
	}
	return ""
}

func mb(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// ChatBound is implemented by senders that may be told no chat: an account
// bound to one chat (a WeCom group robot, a Discord webhook, our webhook)
// says false.
type ChatBound interface {
	NeedsChat() bool
}

// NeedsChat reports whether s must be told which chat to send to.
func NeedsChat(s Sender) bool {
	if b, ok := s.(ChatBound); ok {
		return b.NeedsChat()
	}
	return true
}

// splitBytes cuts s into pieces of at most n bytes of UTF-8, on rune
// boundaries, preferring the last line break (else space) in a piece's
// second half so that lines stay whole where they can.
func splitBytes(s string, n int) []string {
	return split(s, func(s string) int {
		if len(s) <= n {
			return -1
		}
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return cut
	})
}

// splitRunes cuts s into pieces of at most n characters (code points),
// preferring line breaks and spaces as splitBytes does.
func splitRunes(s string, n int) []string {
	return split(s, func(s string) int {
		i := 0
		for off := range s {
			if i == n {
				return off
			}
			i++
		}
		return -1
	})
}

// split cuts s into pieces: limit returns the byte offset the next piece
// must end by, or -1 when the rest fits; the cut moves back to the last
// line break (else space) in the piece's second half.
func split(s string, limit func(s string) int) []string {
	var out []string
	for {
		cut := limit(s)
		if cut < 0 {
			break
		}
		if i := strings.LastIndexByte(s[:cut], '\n'); i >= cut/2 {
			cut = i + 1
		} else if i := strings.LastIndexByte(s[:cut], ' '); i >= cut/2 {
			cut = i + 1
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}

// window counts the messages sent in the last span, for a platform that
// allows only limit of them (WeCom's group robot: 20 a minute).
type window struct {
	mu    sync.Mutex
	span  time.Duration
	per   string // the span in words: "minute"
	limit int
	sent  []time.Time
}

// wait returns how long until another message may go: zero while fewer
// than limit went in the last span, else until the oldest of them leaves
// it.
func (w *window) wait(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trim(now)
	if len(w.sent) < w.limit {
		return 0
	}
	return w.sent[len(w.sent)-w.limit].Add(w.span).Sub(now)
}

// full returns the wait after the platform said the limit is reached:
// until the oldest message of the span leaves it, or a whole span when
// none is known here (another process sent them).
func (w *window) full(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trim(now)
	if len(w.sent) == 0 {
		return w.span
	}
	return max(w.sent[0].Add(w.span).Sub(now), time.Second)
}

func (w *window) record(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, now)
	w.trim(now)
}

func (w *window) trim(now time.Time) {
	i := 0
	for i < len(w.sent) && !w.sent[i].Add(w.span).After(now) {
		i++
	}
	w.sent = w.sent[i:]
}

// pace waits, within ctx's deadline, until w lets another message go; a
// wait longer than the call has left fails, saying when to try again.
func (a *api) pace(ctx context.Context, w *window) error {
	d := w.wait(a.o.Now())
	if d <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return a.errorf(0, "its limit of %d messages a %s is reached and the next may go in %s, more than the call has left. Next: try again in %s, or send fewer files or a shorter message",
			w.limit, w.per, d.Round(time.Second), d.Round(time.Second))
	}
	if err := a.o.Sleep(ctx, d); err != nil {
		return fmt.Errorf("%s: stopped while waiting for its message limit: %w", a.name, err)
	}
	return nil
}
