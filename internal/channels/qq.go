package channels

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// QQAccount is a QQ official bot: its AppID and AppSecret (clientSecret),
// the API's base URL (https://api.sgroup.qq.com) and the token endpoint
// (https://bots.qq.com/app/getAppAccessToken).
type QQAccount struct {
	AppID, AppSecret, BaseURL, TokenURL string
}

// QQ sends through the bot API v2, as passive replies only: QQ withdrew
// proactive messages on 2025-04-21, so every message names the user's
// message it answers (msg_id, from X-Reply-To) or the event
// ("event:<id>", as event_id). Each file is uploaded to
// /v2/groups/{id}/files (or /v2/users/{id}/files for a one-to-one chat),
// then sent as a rich-media message (msg_type 7) with the file_info the
// upload returned; the caption is the first file's text.
//
// The rich-media upload takes the file by url, which QQ's servers fetch
// (file_data is marked "not yet supported"): with Options.Links the url is
// a signed, short-lived link to the workspace file (TOOLSVC_PUBLIC_URL).
// Without it the bytes go as base64 file_data, which QQ may refuse.
//
// Docs: https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html
// and https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/rich-media.html
type QQ struct {
	acct    QQAccount
	api     api
	token   tokenCache
	links   Linker
	replies *replyBook
}

// NewQQ returns the sender of one QQ bot.
func NewQQ(acct QQAccount, o Options) *QQ {
	o = o.withDefaults()
	acct.BaseURL = strings.TrimRight(acct.BaseURL, "/")
	q := &QQ{acct: acct, api: api{name: "qq", o: o}, links: o.Links,
		replies: &replyBook{now: o.Now, firstSeq: randomSeq, m: map[string]*booked{}}}
	q.token = tokenCache{now: o.Now, fetch: q.fetchToken}
	return q
}

// The QQ file types of the rich-media upload: 1 image, 2 video, 3 voice
// (silk/amr), 4 file (not open to bots).
const (
	qqImage = 1
	qqVideo = 2
)

// QQ's limits, before the base64 encoding.
const (
	qqImageMax = 10 << 20
	qqVideoMax = 20 << 20
)

// Check lets through what the rich-media doc lists: png/jpg images and mp4
// videos.
func (q *QQ) Check(f *File) string {
	switch {
	case f.Kind == Image && (f.Ext == "png" || f.Ext == "jpg" || f.Ext == "jpeg"):
		return limitFor("qq", f, qqImageMax, "images")
	case f.Ext == "mp4":
		return limitFor("qq", f, qqVideoMax, "videos")
	}
	return "qq bots can send only png and jpg images and mp4 videos; send a link or use another channel for ." + f.Ext + " files"
}

func (q *QQ) fetchToken(ctx context.Context) (string, time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"appId": q.acct.AppID, "clientSecret": q.acct.AppSecret})
	r, err := q.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, q.acct.TokenURL, body)
	}, nil)
	if err != nil {
		return "", 0, err
	}
	var tr struct {
		Token     string          `json:"access_token"`
		ExpiresIn json.RawMessage `json:"expires_in"` // "7200", a string
		Code      int             `json:"code"`
		Message   string          `json:"message"`
	}
	if json.Unmarshal(r.Body, &tr) != nil || tr.Token == "" {
		return "", 0, q.api.errorf(r.Status, "access token: code %d: %s. Next: check TOOLSVC_QQ_APP_ID and TOOLSVC_QQ_APP_SECRET", tr.Code, tr.Message)
	}
	secs, _ := strconv.Atoi(strings.Trim(string(tr.ExpiresIn), `"`))
	return tr.Token, time.Duration(secs) * time.Second, nil
}

// qqHints are what to do next after the codes QQ answers most often when a
// reply cannot go.
var qqHints = map[int]string{
	40034102: "QQ takes only replies to a user's message. Next: pass X-Reply-To with the ID of the user's QQ message",
	40054005: "QQ took it for a repeat of an earlier reply (msg_seq). Next: send the file again",
	22009:    "QQ says too many messages: it takes at most 5 replies to one user message, within 5 minutes of it in a group and 60 in a direct chat. Next: send the rest after the user's next message",
	40054010: "QQ refuses a message holding a URL that is not registered for the bot at q.qq.com (开发设置, 消息URL配置). Next: call again with the message reworded without the address",
	304082:   "QQ could not fetch the file from its link. Next: tell the user the file could not be sent; the operator should check that TOOLSVC_PUBLIC_URL reaches this service from the internet",
	304083:   "QQ could not fetch the file from its link. Next: tell the user the file could not be sent; the operator should check that TOOLSVC_PUBLIC_URL reaches this service from the internet",
}

// call makes an authorized request; a 401 fetches the token anew once.
func (q *QQ) call(ctx context.Context, build func(ctx context.Context) (*http.Request, error), out any) error {
	for try := 0; ; try++ {
		tok, err := q.token.get(ctx)
		if err != nil {
			return err
		}
		r, err := q.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
			req, err := build(ctx)
			if err == nil {
				req.Header.Set("Authorization", "QQBot "+tok)
				req.Header.Set("X-Union-Appid", q.acct.AppID)
			}
			return req, err
		}, nil)
		if err != nil {
			return err
		}
		if r.Status == http.StatusUnauthorized && try == 0 {
			q.token.drop(tok)
			continue
		}
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		decoded := json.Unmarshal(r.Body, &e) == nil
		if r.Status < 200 || r.Status > 299 || (decoded && e.Code != 0) {
			if !decoded {
				e.Message = runes.Shorten(strings.TrimSpace(string(r.Body)), 200)
			}
			return q.refusal(r.Status, e.Code, e.Message)
		}
		if out != nil && json.Unmarshal(r.Body, out) != nil {
			return q.api.errorf(r.Status, "unreadable answer: %s", runes.Shorten(strings.TrimSpace(string(r.Body)), 200))
		}
		return nil
	}
}

// refusal is QQ's refusal with what to do next where the code (or, for
// an expired message, which has no documented code, the text) says.
func (q *QQ) refusal(status, code int, msg string) error {
	if h, ok := qqHints[code]; ok {
		return q.api.errorf(status, "code %d: %s. %s", code, msg, h)
	}
	if strings.Contains(msg, "过期") {
		return q.api.errorf(status, "code %d: %s. QQ says the message replied to has expired: it takes replies within 5 minutes of a group message and 60 of a direct one. "+
			"Next: tell the user which files were not sent, or send them after the user's next message, with its ID in X-Reply-To", code, msg)
	}
	return q.api.errorf(status, "code %d: %s", code, msg)
}

// qqChat reads a chat ID: "user:ID" or "c2c:ID" is a one-to-one chat,
// any other (also "group:ID") a group.
func qqChat(chat string) (group bool, id string) {
	for _, p := range []string{"user:", "c2c:", "user/", "c2c/"} {
		if id, ok := strings.CutPrefix(chat, p); ok {
			return false, id
		}
	}
	for _, p := range []string{"group:", "group/"} {
		chat = strings.TrimPrefix(chat, p)
	}
	return true, chat
}

// path is /v2/groups/{id} or /v2/users/{id}.
func (q *QQ) path(chat string) string {
	group, id := qqChat(chat)
	if !group {
		return q.acct.BaseURL + "/v2/users/" + url.PathEscape(id)
	}
	return q.acct.BaseURL + "/v2/groups/" + url.PathEscape(id)
}

// uploadRequest streams {"file_type":N,"srv_send_msg":false,"file_data":"<base64>"}
// from the file, with its exact length: the fallback without a public URL.
func uploadRequest(ctx context.Context, u string, fileType int, f *File) (*http.Request, error) {
	head := fmt.Sprintf(`{"file_type":%d,"srv_send_msg":false,"file_data":"`, fileType)
	tail := `"}`
	pr, pw := io.Pipe()
	go func() {
		_, err := io.WriteString(pw, head)
		if err == nil {
			enc := base64.NewEncoder(base64.StdEncoding, pw)
			var n int64
			n, err = io.Copy(enc, f.reader())
			if err == nil && n != f.Size {
				err = fmt.Errorf("%s changed size while it was being sent", f.Name)
			}
			if err == nil {
				err = enc.Close()
			}
		}
		if err == nil {
			_, err = io.WriteString(pw, tail)
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	req.ContentLength = int64(len(head)+len(tail)) + int64(base64.StdEncoding.EncodedLen(int(f.Size)))
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// upload hands QQ the file and returns the file_info a message carries:
// by url when the file has a public link, else as file_data.
func (q *QQ) upload(ctx context.Context, chat string, f *File) (string, error) {
	ft := qqImage
	if f.Kind == Video {
		ft = qqVideo
	}
	var build func(ctx context.Context) (*http.Request, error)
	byURL := q.links != nil && f.Path != ""
	if byURL {
		link, err := q.links.URL(f.Folder, f.Path)
		if err != nil {
			return "", fmt.Errorf("no public link for it: %w", err)
		}
		body, _ := json.Marshal(map[string]any{"file_type": ft, "url": link, "srv_send_msg": false})
		build = func(ctx context.Context) (*http.Request, error) {
			return jsonRequest(ctx, http.MethodPost, q.path(chat)+"/files", body)
		}
	} else {
		build = func(ctx context.Context) (*http.Request, error) {
			return uploadRequest(ctx, q.path(chat)+"/files", ft, f)
		}
	}
	var up struct {
		FileInfo string `json:"file_info"`
	}
	if err := q.call(ctx, build, &up); err != nil {
		if !byURL {
			return "", fmt.Errorf("upload as file_data (this service has no TOOLSVC_PUBLIC_URL for QQ to fetch it from; the operator should set it): %w", err)
		}
		return "", fmt.Errorf("upload: %w", err)
	}
	if up.FileInfo == "" {
		return "", q.api.errorf(0, "the upload returned no file_info")
	}
	return up.FileInfo, nil
}

// reply sends one message in reply to ref, taking one of its reply slots
// and a msg_seq of its own. QQ de-duplicates replies to an event by
// event_id + msg_seq as it does replies to a message by msg_id + msg_seq
// (msg_seq 1 when none is given), so both carry one.
func (q *QQ) reply(ctx context.Context, chat string, ref qqRef, body map[string]any) error {
	group, _ := qqChat(chat)
	seq, err := q.replies.reserve(ref.id, group)
	if err != nil {
		return err
	}
	if ref.event {
		body["event_id"] = ref.id
	} else {
		body["msg_id"] = ref.id
	}
	body["msg_seq"] = seq
	b, _ := json.Marshal(body)
	err = q.call(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, q.path(chat)+"/messages", b)
	}, nil)
	if err != nil {
		q.replies.release(ref.id)
	}
	return err
}

// errRepliesUsed fails what is left of a message once its replies are
// used up, before anything is uploaded.
var errRepliesUsed = fmt.Errorf("not sent: QQ takes at most %d replies to one user message, and this one's are used up (by this call or an earlier one). "+
	"Next: tell the user which files were not sent, or send them after the user's next message, with its ID in X-Reply-To", qqMaxReplies)

// errWindowClosed fails what is left of a message whose reply window is
// over: QQ would refuse the reply, so nothing is uploaded for it.
func errWindowClosed(group bool) error {
	where, window := "a direct chat's message", qqWindowDirect
	if group {
		where, window = "a group message", qqWindowGroup
	}
	return fmt.Errorf("not sent: QQ takes replies to %s only within %d minutes of it, and this one's are over. "+
		"Next: tell the user which files were not sent, or send them after the user's next message, with its ID in X-Reply-To", where, int(window.Minutes()))
}

// qqURL finds what QQ's content check takes for a URL: a scheme, "www.",
// or a domain name ending in a common top-level domain (QQ catches bare
// domains too). Words such as "report.pdf" or "v1.2" are not addresses.
var qqURL = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://\S*|\bwww\.\S+|\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|cn|net|org|io|ai|app|dev|xyz|top|cc|tv|info|site|online|tech|vip|club|shop|link|ltd|wang|gov|edu)\b\S*`)

// errCaptionURL fails every part of a message whose caption holds a URL:
// QQ refuses it (40054010) unless the URL is registered for the bot, which
// this service cannot see, and the caption goes with the first file.
func errCaptionURL(found string) error {
	return fmt.Errorf("not sent: the message holds a URL (%s), and QQ refuses messages with URLs that are not registered for the bot at q.qq.com "+
		"(开发设置, 消息URL配置; error 40054010), bare domains included. Next: call again with the message reworded without the address "+
		"(such as \"example dot com\"), or without a message", runes.Shorten(found, 80))
}

// errNoReplyTo fails every part of a message that names no user message.
var errNoReplyTo = errors.New("not sent: QQ bots can only reply to a user's message (proactive messages were withdrawn on 2025-04-21), and this call names none. " +
	"Next: pass the X-Reply-To header with the ID of the user's QQ message (or event:<event ID>), then call again")

// qqRef is the incoming message (or event) a reply answers.
type qqRef struct {
	id    string
	event bool
}

// qqReplyRef reads X-Reply-To: a message ID (msg_id), or "event:<id>"
// for an event ID (event_id).
func qqReplyRef(v string) (qqRef, bool) {
	v = strings.TrimSpace(v)
	if id, ok := strings.CutPrefix(v, "event:"); ok {
		return qqRef{id: strings.TrimSpace(id), event: true}, strings.TrimSpace(id) != ""
	}
	return qqRef{id: v}, v != ""
}

// Send replies to the message m.ReplyTo names: each file as a rich-media
// message, the caption with the first one that goes (or alone, when none
// does), at most qqMaxReplies messages for one user message.
func (q *QQ) Send(ctx context.Context, m *Message) Outcome {
	out := Outcome{Files: make([]error, len(m.Files))}
	caption := strings.TrimSpace(m.Caption) != ""
	ref, ok := qqReplyRef(m.ReplyTo)
	var refused error
	switch {
	case !ok:
		refused = errNoReplyTo
	case caption && qqURL.MatchString(m.Caption):
		refused = errCaptionURL(qqURL.FindString(m.Caption))
	}
	if refused != nil {
		for i := range out.Files {
			out.Files[i] = refused
		}
		if caption {
			out.Caption = refused
		}
		return out
	}
	chat := m.Target.ChatID
	group, _ := qqChat(chat)
	for i, f := range m.Files {
		if err := q.replies.check(ref.id, group); err != nil {
			out.Files[i] = err
			continue
		}
		info, err := q.upload(ctx, chat, f)
		if err != nil {
			out.Files[i] = err
			continue
		}
		// QQ wants some content with msg_type 7: a space when there is
		// no caption to give.
		text := " "
		if caption {
			text = m.Caption
		}
		out.Files[i] = q.reply(ctx, chat, ref, map[string]any{"msg_type": 7, "content": text, "media": map[string]string{"file_info": info}})
		if out.Files[i] == nil {
			caption = false
		}
	}
	if caption {
		out.Caption = q.reply(ctx, chat, ref, map[string]any{"msg_type": 0, "content": m.Caption})
	}
	return out
}

// qqMaxReplies is how many replies QQ takes to one user message; the
// service counts its own, across calls.
const qqMaxReplies = 5

// QQ takes replies to a message within 5 minutes of it in a group and 60
// in a one-to-one chat. The service cannot see when the user's message
// came, so a message's window is measured from its first reply here,
// which is no earlier: once that is over, QQ would refuse the reply too.
// A message's count is kept for twice the longer window, so that a call
// after its window is told so before anything is uploaded.
const (
	qqWindowGroup  = 5 * time.Minute
	qqWindowDirect = 60 * time.Minute
	qqKeepBooked   = 2 * qqWindowDirect
)

// qqMaxBooked bounds the messages whose replies are counted; beyond it the
// oldest is forgotten.
const qqMaxBooked = 4096

// replyBook counts the replies sent to each user message and hands out
// their msg_seq. QQ refuses a msg_seq used before for the same msg_id, and
// the agent that called may reply to the same message itself, counting
// from 1: a message's sequence starts at a random number well above that
// and goes up by one.
type replyBook struct {
	mu       sync.Mutex
	now      func() time.Time
	firstSeq func() int64
	m        map[string]*booked
}

type booked struct {
	sent    int       // replies sent or on their way
	lastSeq int64     // the last msg_seq handed out
	closes  time.Time // QQ's reply window is over by then
	until   time.Time // the count is forgotten then
}

// randomSeq is a message's first msg_seq: in [1000, 1000000), the range
// other QQ bots use and QQ takes.
func randomSeq() int64 { return 1000 + rand.Int64N(999000) }

// entry returns id's count, made when missing (a group message's with
// the group's window); b.mu is held.
func (b *replyBook) entry(id string, group bool) *booked {
	now := b.now()
	if e, ok := b.m[id]; ok && now.Before(e.until) {
		return e
	}
	if len(b.m) >= qqMaxBooked {
		var oldest string
		for k, e := range b.m {
			if !now.Before(e.until) {
				delete(b.m, k)
			} else if oldest == "" || e.until.Before(b.m[oldest].until) {
				oldest = k
			}
		}
		if len(b.m) >= qqMaxBooked {
			delete(b.m, oldest)
		}
	}
	window := qqWindowDirect
	if group {
		window = qqWindowGroup
	}
	e := &booked{lastSeq: b.firstSeq() - 1, closes: now.Add(window), until: now.Add(qqKeepBooked)}
	b.m[id] = e
	return e
}

// usable returns why e takes no more replies, or nil; b.mu is held.
func (b *replyBook) usable(e *booked, group bool) error {
	switch {
	case !b.now().Before(e.closes):
		return errWindowClosed(group)
	case e.sent >= qqMaxReplies:
		return errRepliesUsed
	}
	return nil
}

// check returns why id takes no more replies (its window is over, or its
// replies are used up), or nil.
func (b *replyBook) check(id string, group bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usable(b.entry(id, group), group)
}

// reserve takes one of id's replies and a fresh msg_seq for it, or says
// why none can go.
func (b *replyBook) reserve(id string, group bool) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(id, group)
	if err := b.usable(e, group); err != nil {
		return 0, err
	}
	e.sent++
	e.lastSeq++
	return e.lastSeq, nil
}

// release gives back a reply QQ refused; its msg_seq is not used again.
func (b *replyBook) release(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.m[id]; ok && e.sent > 0 {
		e.sent--
	}
}

var _ Sender = (*QQ)(nil)
