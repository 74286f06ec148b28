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
	22009:    "QQ says too many messages: it takes at most 5 replies to one user message, within 60 minutes of it (5 in a group). Next: send the rest after the user's next message",
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
			if h, ok := qqHints[e.Code]; ok {
				return q.api.errorf(r.Status, "code %d: %s. %s", e.Code, e.Message, h)
			}
			return q.api.errorf(r.Status, "code %d: %s", e.Code, e.Message)
		}
		if out != nil && json.Unmarshal(r.Body, out) != nil {
			return q.api.errorf(r.Status, "unreadable answer: %s", runes.Shorten(strings.TrimSpace(string(r.Body)), 200))
		}
		return nil
	}
}

// path is /v2/groups/{id} or /v2/users/{id}: a chat ID "user:ID" or
// "c2c:ID" is a one-to-one chat, any other (also "group:ID") a group.
func (q *QQ) path(chat string) string {
	for _, p := range []string{"user:", "c2c:", "user/", "c2c/"} {
		if id, ok := strings.CutPrefix(chat, p); ok {
			return q.acct.BaseURL + "/v2/users/" + url.PathEscape(id)
		}
	}
	for _, p := range []string{"group:", "group/"} {
		chat = strings.TrimPrefix(chat, p)
	}
	return q.acct.BaseURL + "/v2/groups/" + url.PathEscape(chat)
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
// and a msg_seq of its own.
func (q *QQ) reply(ctx context.Context, chat string, ref qqRef, body map[string]any) error {
	seq, ok := q.replies.reserve(ref.id)
	if !ok {
		return errRepliesUsed
	}
	if ref.event {
		body["event_id"] = ref.id
	} else {
		body["msg_id"] = ref.id
		body["msg_seq"] = seq
	}
	b, _ := json.Marshal(body)
	err := q.call(ctx, func(ctx context.Context) (*http.Request, error) {
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
	if !ok {
		for i := range out.Files {
			out.Files[i] = errNoReplyTo
		}
		if caption {
			out.Caption = errNoReplyTo
		}
		return out
	}
	chat := m.Target.ChatID
	for i, f := range m.Files {
		if q.replies.left(ref.id) == 0 {
			out.Files[i] = errRepliesUsed
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

// qqReplyWindow is how long QQ takes replies to a message: 60 minutes in a
// one-to-one chat, 5 in a group. A message's count is kept that long.
const qqReplyWindow = time.Hour

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
	sent    int   // replies sent or on their way
	lastSeq int64 // the last msg_seq handed out
	until   time.Time
}

// randomSeq is a message's first msg_seq: in [1000, 1000000), the range
// other QQ bots use and QQ takes.
func randomSeq() int64 { return 1000 + rand.Int64N(999000) }

// entry returns id's count, made when missing; b.mu is held.
func (b *replyBook) entry(id string) *booked {
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
	e := &booked{lastSeq: b.firstSeq() - 1, until: now.Add(qqReplyWindow)}
	b.m[id] = e
	return e
}

// left returns how many replies id has left.
func (b *replyBook) left(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return qqMaxReplies - b.entry(id).sent
}

// reserve takes one of id's replies and a fresh msg_seq for it; ok is
// false when none is left.
func (b *replyBook) reserve(id string) (seq int64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(id)
	if e.sent >= qqMaxReplies {
		return 0, false
	}
	e.sent++
	e.lastSeq++
	return e.lastSeq, true
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
