package channels

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// QQAccount is a QQ official bot: its AppID and AppSecret (clientSecret),
// the API's base URL (https://api.sgroup.qq.com) and the token endpoint
// (https://bots.qq.com/app/getAppAccessToken).
type QQAccount struct {
	AppID, AppSecret, BaseURL, TokenURL string
}

// QQ sends through the bot API v2: a file is uploaded in the JSON body as
// base64 file_data to /v2/groups/{id}/files (or /v2/users/{id}/files for a
// one-to-one chat), then sent as a rich-media message (msg_type 7) with the
// file_info the upload returned. Unlike CountBot, no public URL (OSS) is
// needed.
type QQ struct {
	acct  QQAccount
	api   api
	token tokenCache
	seq   atomic.Int64
}

// NewQQ returns the sender of one QQ bot.
func NewQQ(acct QQAccount, o Options) *QQ {
	o = o.withDefaults()
	acct.BaseURL = strings.TrimRight(acct.BaseURL, "/")
	q := &QQ{acct: acct, api: api{name: "qq", o: o}}
	q.token = tokenCache{now: o.Now, fetch: q.fetchToken}
	return q
}

// The QQ file types: images and video are what group and one-to-one chats
// take; voice must be SILK and plain files are not open to bots.
const (
	qqImage = 1
	qqVideo = 2
)

// QQ's limits, before the base64 encoding.
const (
	qqImageMax = 10 << 20
	qqVideoMax = 20 << 20
)

// Check lets through only what QQ bots can send.
func (q *QQ) Check(f *File) string {
	switch {
	case f.Kind == Image && (f.Ext == "png" || f.Ext == "jpg" || f.Ext == "jpeg" || f.Ext == "gif"):
		return limitFor("qq", f, qqImageMax, "images")
	case f.Ext == "mp4":
		return limitFor("qq", f, qqVideoMax, "videos")
	}
	return "qq bots can send only images (png, jpg, gif) and mp4 videos; send a link or use another channel for ." + f.Ext + " files"
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
// from the file, with its exact length.
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

func (q *QQ) message(ctx context.Context, chat string, body map[string]any) error {
	body["msg_seq"] = q.seq.Add(1)
	b, _ := json.Marshal(body)
	return q.call(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, q.path(chat)+"/messages", b)
	}, nil)
}

func (q *QQ) file(ctx context.Context, chat string, f *File) error {
	ft := qqImage
	if f.Kind == Video {
		ft = qqVideo
	}
	var up struct {
		FileInfo string `json:"file_info"`
	}
	if err := q.call(ctx, func(ctx context.Context) (*http.Request, error) {
		return uploadRequest(ctx, q.path(chat)+"/files", ft, f)
	}, &up); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if up.FileInfo == "" {
		return q.api.errorf(0, "the upload returned no file_info")
	}
	return q.message(ctx, chat, map[string]any{"msg_type": 7, "content": " ", "media": map[string]string{"file_info": up.FileInfo}})
}

// Send posts the caption as a text message, then each file.
func (q *QQ) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	return sendEach(ctx, m, func(ctx context.Context, s string) error {
		return q.message(ctx, chat, map[string]any{"msg_type": 0, "content": s})
	}, func(ctx context.Context, f *File) error { return q.file(ctx, chat, f) })
}

var _ Sender = (*QQ)(nil)
