package channels

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// WeComAccount is either a WeCom self-built app (CorpID, AgentID, Secret,
// with BaseURL https://qyapi.weixin.qq.com) or, with WebhookURL set, a group
// robot (https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...), which
// always posts to its own group.
type WeComAccount struct {
	CorpID, Secret, BaseURL string
	AgentID                 int64
	WebhookURL              string
}

// WeCom sends as a self-built app (media/upload, then message/send to
// users, "party:ID" or "tag:ID") or as a group robot (webhook/upload_media,
// then webhook/send).
type WeCom struct {
	acct  WeComAccount
	api   api
	token tokenCache
	sent  window // a robot's messages of the last minute
}

// NewWeCom returns the sender of one WeCom app or robot.
func NewWeCom(acct WeComAccount, o Options) *WeCom {
	o = o.withDefaults()
	acct.BaseURL = strings.TrimRight(acct.BaseURL, "/")
	w := &WeCom{acct: acct, api: api{name: "wecom", o: o}, sent: window{span: time.Minute, per: "minute", limit: wecomRobotPerMinute}}
	w.api.limited = w.limited
	w.token = tokenCache{now: o.Now, fetch: w.fetchToken}
	return w
}

// WeCom's limits: media of more than 5 bytes; images (jpg, png) and videos
// (mp4) up to 10 MB, files up to 20 MB; a robot's inline image up to 2 MB
// (https://developer.work.weixin.qq.com/document/path/90253 and 91770).
// Larger images and videos go as files. A text message holds at most 2048
// bytes of UTF-8 (both the app's message/send, 90236, and the robot's,
// 91770); a robot sends at most 20 messages a minute (91770), beyond which
// it answers 45009.
const (
	wecomMin            = 6
	wecomMediaMax       = 10 << 20
	wecomFileMax        = 20 << 20
	wecomInline         = 2 << 20
	wecomTextMax        = 2048
	wecomRobotPerMinute = 20
)

func (w *WeCom) robot() bool { return w.acct.WebhookURL != "" }

// Check applies WeCom's limits.
func (w *WeCom) Check(f *File) string {
	if f.Size < wecomMin {
		return "wecom takes files of more than 5 bytes only. Next: leave it out, or send what it holds as the message"
	}
	return limitFor("wecom", f, wecomFileMax, "files")
}

// WeCom codes: token invalid, expired or missing; over a frequency limit;
// none of a message's recipients reachable.
const (
	wecomTokenInvalid = 40014
	wecomTokenExpired = 42001
	wecomTokenMissing = 41001
	wecomRateLimited  = 45009
	wecomRateMinute   = 45033
	wecomNoRecipient  = 81013
)

// wecomHints are what to do next after the refusals a model can act on.
var wecomHints = map[int]string{
	wecomNoRecipient: "none of the users, departments or tags named can get the app's messages (no such ID, or not in the app's visible range). " +
		"Next: check the chat ID (user IDs, party:<id>, tag:<id>); the WeCom admin must add them to the app's visible range",
}

// wecomReply holds the fields of WeCom's answers. message/send answers
// errcode 0 when some recipients could not get the message and names them
// ("a|b") in the invalid fields: the others did get it
// (https://developer.work.weixin.qq.com/document/path/90236).
type wecomReply struct {
	ErrCode        int    `json:"errcode"`
	ErrMsg         string `json:"errmsg"`
	Token          string `json:"access_token"`
	ExpiresIn      int64  `json:"expires_in"`
	MediaID        string `json:"media_id"`
	InvalidUser    string `json:"invaliduser"`
	InvalidParty   string `json:"invalidparty"`
	InvalidTag     string `json:"invalidtag"`
	UnlicensedUser string `json:"unlicenseduser"`
}

// missed names the recipients a delivered message did not reach, or "".
func (wr wecomReply) missed() string {
	var out []string
	for _, g := range []struct{ what, ids string }{
		{"users", wr.InvalidUser}, {"departments", wr.InvalidParty}, {"tags", wr.InvalidTag}, {"users without a license", wr.UnlicensedUser},
	} {
		var ids []string
		for _, id := range strings.Split(g.ids, "|") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			out = append(out, g.what+" "+strings.Join(ids, ", "))
		}
	}
	return strings.Join(out, "; ")
}

func decodeWeCom(r *reply) (wecomReply, bool) {
	var wr wecomReply
	return wr, json.Unmarshal(r.Body, &wr) == nil
}

// limited reads WeCom's frequency limits, which come as HTTP 200 with an
// errcode and no hint. 45009 is a per-minute limit (a robot's 20 messages
// a minute): the wait runs until the minute of the oldest message sent
// here is over, or a whole minute when none was; 45033 (too many at once)
// waits a second.
func (w *WeCom) limited(r *reply) (time.Duration, bool) {
	wr, _ := decodeWeCom(r)
	switch wr.ErrCode {
	case wecomRateLimited:
		return w.sent.full(w.api.o.Now()), true
	case wecomRateMinute:
		return time.Second, true
	}
	return 0, false
}

func (w *WeCom) fetchToken(ctx context.Context) (string, time.Duration, error) {
	u := w.acct.BaseURL + "/cgi-bin/gettoken?corpid=" + url.QueryEscape(w.acct.CorpID) + "&corpsecret=" + url.QueryEscape(w.acct.Secret)
	r, err := w.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	}, nil)
	if err != nil {
		return "", 0, err
	}
	wr, _ := decodeWeCom(r)
	if wr.ErrCode != 0 || wr.Token == "" {
		return "", 0, w.api.errorf(r.Status, "access token: errcode %d: %s. Next: check TOOLSVC_WECOM_CORP_ID and TOOLSVC_WECOM_SECRET", wr.ErrCode, wr.ErrMsg)
	}
	return wr.Token, time.Duration(wr.ExpiresIn) * time.Second, nil
}

// call makes a request; for an app, u gets the access token and an
// answer calling it invalid fetches it anew once.
func (w *WeCom) call(ctx context.Context, u string, build func(ctx context.Context, u string) (*http.Request, error)) (wecomReply, error) {
	for try := 0; ; try++ {
		full, tok := u, ""
		if !w.robot() {
			var err error
			if tok, err = w.token.get(ctx); err != nil {
				return wecomReply{}, err
			}
			full = addQuery(u, "access_token", tok)
		}
		r, err := w.api.do(ctx, func(ctx context.Context) (*http.Request, error) { return build(ctx, full) }, nil)
		if err != nil {
			return wecomReply{}, err
		}
		wr, ok := decodeWeCom(r)
		switch {
		case !w.robot() && try == 0 && (wr.ErrCode == wecomTokenInvalid || wr.ErrCode == wecomTokenExpired || wr.ErrCode == wecomTokenMissing):
			w.token.drop(tok)
			continue
		case r.Status != http.StatusOK || !ok:
			return wr, w.api.errorf(r.Status, "%s", runes.Shorten(strings.TrimSpace(string(r.Body)), 200))
		case wr.ErrCode != 0 && wecomHints[wr.ErrCode] != "":
			return wr, w.api.errorf(r.Status, "errcode %d: %s. %s", wr.ErrCode, wr.ErrMsg, wecomHints[wr.ErrCode])
		case wr.ErrCode != 0:
			return wr, w.api.errorf(r.Status, "errcode %d: %s", wr.ErrCode, wr.ErrMsg)
		}
		return wr, nil
	}
}

func addQuery(u, k, v string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + k + "=" + url.QueryEscape(v)
}

// upload puts f into WeCom's media store as typ.
func (w *WeCom) upload(ctx context.Context, f *File, typ string) (string, error) {
	u := w.acct.BaseURL + "/cgi-bin/media/upload?type=" + typ
	if w.robot() {
		u = strings.Replace(w.acct.WebhookURL, "/webhook/send", "/webhook/upload_media", 1) + "&type=" + typ
	}
	wr, err := w.call(ctx, u, func(ctx context.Context, u string) (*http.Request, error) {
		return newForm(part{Name: "media", File: f, Disposition: "; filelength=" + strconv.FormatInt(f.Size, 10)}).request(ctx, u)
	})
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	if wr.MediaID == "" {
		return "", w.api.errorf(0, "the upload returned no media_id")
	}
	return wr.MediaID, nil
}

// send posts one message of msgtype with its body, and returns the
// recipients it did not reach (see wecomReply.missed).
func (w *WeCom) send(ctx context.Context, chat, msgtype string, content any) (string, error) {
	body := map[string]any{"msgtype": msgtype, msgtype: content}
	u := w.acct.WebhookURL
	if !w.robot() {
		u = w.acct.BaseURL + "/cgi-bin/message/send"
		body["agentid"] = w.acct.AgentID
		switch {
		case strings.HasPrefix(chat, "party:"):
			body["toparty"] = strings.TrimPrefix(chat, "party:")
		case strings.HasPrefix(chat, "tag:"):
			body["totag"] = strings.TrimPrefix(chat, "tag:")
		case chat == "":
			return "", w.api.errorf(0, "no user to send to: the session names no chat")
		default:
			body["touser"] = strings.TrimPrefix(chat, "user:")
		}
	}
	b, _ := json.Marshal(body)
	if w.robot() {
		// A robot's 20 messages a minute: wait for room rather than be
		// refused.
		if err := w.api.pace(ctx, &w.sent); err != nil {
			return "", err
		}
	}
	wr, err := w.call(ctx, u, func(ctx context.Context, u string) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, u, b)
	})
	if err != nil {
		return "", err
	}
	if w.robot() {
		w.sent.record(w.api.o.Now())
	}
	return wr.missed(), nil
}

// text sends s as text messages of at most 2048 bytes each, cut on rune
// boundaries (at a line break where one is near), in order; a failed part
// stops the rest and says how far it went. It returns the recipients the
// first part that missed some did not reach: the parts go to the same
// ones.
func (w *WeCom) text(ctx context.Context, chat, s string) (string, error) {
	parts := splitBytes(s, wecomTextMax)
	missed := ""
	for i, p := range parts {
		m, err := w.send(ctx, chat, "text", map[string]string{"content": p})
		if err != nil {
			if len(parts) > 1 {
				return "", fmt.Errorf("part %d of %d (WeCom takes 2048 bytes a message, so the message went in parts): %w", i+1, len(parts), err)
			}
			return "", err
		}
		if missed == "" {
			missed = m
		}
	}
	return missed, nil
}

func (w *WeCom) file(ctx context.Context, chat string, f *File) (string, error) {
	if w.robot() && f.Kind == Image && (f.Ext == "png" || f.Ext == "jpg" || f.Ext == "jpeg") && f.Size <= wecomInline {
		// A robot sends images inline (base64 and MD5), at most 2 MB.
		data, err := io.ReadAll(f.reader())
		if err != nil {
			return "", err
		}
		sum := md5.Sum(data)
		return w.send(ctx, chat, "image", map[string]string{"base64": base64.StdEncoding.EncodeToString(data), "md5": hex.EncodeToString(sum[:])})
	}
	typ := "file"
	if !w.robot() && f.Size <= wecomMediaMax {
		switch {
		case f.Kind == Image && (f.Ext == "png" || f.Ext == "jpg" || f.Ext == "jpeg"):
			typ = "image"
		case f.Ext == "mp4":
			typ = "video"
		}
	}
	id, err := w.upload(ctx, f, typ)
	if err != nil {
		return "", err
	}
	return w.send(ctx, chat, typ, map[string]string{"media_id": id})
}

// Send posts the caption as text messages, then each file. WeCom has no
// replies to name, so m.ReplyTo is not used. A part that reached some of
// its recipients but not all is sent, with a note naming the others.
func (w *WeCom) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	var notes []string
	note := func(part, missed string) {
		if missed != "" {
			notes = append(notes, part+": delivered, but not to "+missed+
				" (no such ID, or not in the app's visible range). Next: tell the user who did not get it; the WeCom admin can add them to the app's visible range")
		}
	}
	out := sendEach(ctx, m, func(ctx context.Context, s string) error {
		missed, err := w.text(ctx, chat, s)
		note("message", missed)
		return err
	}, func(ctx context.Context, f *File) error {
		missed, err := w.file(ctx, chat, f)
		note(f.Name, missed)
		return err
	})
	out.Notes = notes
	return out
}

var _ Sender = (*WeCom)(nil)

// NeedsChat is false for a group robot, which posts to its own group.
func (w *WeCom) NeedsChat() bool { return !w.robot() }
