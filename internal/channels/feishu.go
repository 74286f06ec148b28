package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// FeishuAccount is a Feishu (or Lark) self-built app: its App ID and App
// Secret, and the Open Platform's base URL (https://open.feishu.cn, or
// https://open.larksuite.com for Lark).
type FeishuAccount struct {
	AppID, AppSecret, BaseURL string
}

// Feishu sends through the Open Platform's IM API with a tenant access
// token: images to im/v1/images, other files to im/v1/files, then one
// message per file to im/v1/messages.
type Feishu struct {
	acct  FeishuAccount
	api   api
	token tokenCache
}

// NewFeishu returns the sender of one Feishu app.
func NewFeishu(acct FeishuAccount, o Options) *Feishu {
	o = o.withDefaults()
	acct.BaseURL = strings.TrimRight(acct.BaseURL, "/")
	f := &Feishu{acct: acct, api: api{name: "feishu", o: o}}
	f.api.limited = f.limited
	f.token = tokenCache{now: o.Now, fetch: f.fetchToken}
	return f
}

// Feishu's limits: images up to 10 MB and not empty
// (https://open.feishu.cn/document/server-docs/im-v1/image/create), a GIF
// at most 2000x2000 pixels and other images at most 12000x12000; files up
// to 30 MB and not empty
// (https://open.feishu.cn/document/server-docs/im-v1/file/create).
const (
	feishuImageMax  = 10 << 20
	feishuFileMax   = 30 << 20
	feishuGIFSide   = 2000
	feishuImageSide = 12000
)

// Check applies Feishu's limits, reading an image's dimensions from its
// header, so that a picture Feishu would refuse is not uploaded at all.
func (f *Feishu) Check(file *File) string {
	if file.Size == 0 {
		return "feishu refuses empty files"
	}
	if file.Kind != Image {
		return limitFor("feishu", file, min(feishuFileMax, MaxFileSize), "files")
	}
	if why := limitFor("feishu", file, feishuImageMax, "images"); why != "" {
		return why
	}
	w, h, err := imageSize(file)
	if err != nil {
		return "it cannot be read as a " + file.Ext + " image (" + err.Error() + "). Next: check the file, or put it in a zip archive to send it as a file"
	}
	side := feishuImageSide
	if file.Ext == "gif" {
		side = feishuGIFSide
	}
	if w > side || h > side {
		return fmt.Sprintf("it is %dx%d pixels and feishu takes %s images of at most %dx%d. Next: scale it down, or put it in a zip archive to send it as a file", w, h, file.Ext, side, side)
	}
	return ""
}

// feishuReply is the envelope of every Feishu answer.
type feishuReply struct {
	Code int             `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
	// The token endpoint answers beside data.
	Token  string `json:"tenant_access_token"`
	Expire int64  `json:"expire"`
}

// Feishu codes: the token is invalid or expired; the request is over the
// rate limit.
const (
	feishuTokenInvalid = 99991663
	feishuTokenMissing = 99991661
	feishuTokenExpired = 99991677
	feishuRateLimited  = 99991400
)

func decodeFeishu(r *reply) feishuReply {
	var fr feishuReply
	if json.Unmarshal(r.Body, &fr) != nil {
		fr.Code, fr.Msg = -1, "unreadable answer: "+runes.Shorten(strings.TrimSpace(string(r.Body)), 200)
	}
	return fr
}

// limited reads Feishu's rate-limit reply: HTTP 429 or code 99991400, the
// wait in x-ogw-ratelimit-reset (seconds).
func (f *Feishu) limited(r *reply) (time.Duration, bool) {
	if r.Status != http.StatusTooManyRequests && decodeFeishu(r).Code != feishuRateLimited {
		return 0, false
	}
	if v := r.Header.Get("x-ogw-ratelimit-reset"); v != "" {
		return hint(v, f.api.o.Now()), true
	}
	return hint(r.Header.Get("Retry-After"), f.api.o.Now()), true
}

func (f *Feishu) fetchToken(ctx context.Context) (string, time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"app_id": f.acct.AppID, "app_secret": f.acct.AppSecret})
	r, err := f.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, f.acct.BaseURL+"/open-apis/auth/v3/tenant_access_token/internal", body)
	}, nil)
	if err != nil {
		return "", 0, err
	}
	fr := decodeFeishu(r)
	if fr.Code != 0 || fr.Token == "" {
		return "", 0, f.api.errorf(r.Status, "tenant access token: code %d: %s. Next: check TOOLSVC_FEISHU_APP_ID and TOOLSVC_FEISHU_APP_SECRET", fr.Code, fr.Msg)
	}
	return fr.Token, time.Duration(fr.Expire) * time.Second, nil
}

// call makes an authorized request and decodes data into out; a token the
// API calls invalid is fetched anew and the request made once more.
func (f *Feishu) call(ctx context.Context, build func(ctx context.Context) (*http.Request, error), out any) error {
	for try := 0; ; try++ {
		tok, err := f.token.get(ctx)
		if err != nil {
			return err
		}
		r, err := f.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
			req, err := build(ctx)
			if err == nil {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			return req, err
		}, nil)
		if err != nil {
			return err
		}
		fr := decodeFeishu(r)
		switch {
		case (fr.Code == feishuTokenInvalid || fr.Code == feishuTokenMissing || fr.Code == feishuTokenExpired) && try == 0:
			f.token.drop(tok)
			continue
		case fr.Code != 0:
			return f.api.errorf(r.Status, "code %d: %s", fr.Code, fr.Msg)
		}
		if out != nil && json.Unmarshal(fr.Data, out) != nil {
			return f.api.errorf(r.Status, "unreadable data: %s", runes.Shorten(strings.TrimSpace(string(fr.Data)), 200))
		}
		return nil
	}
}

// receiveIDType tells Feishu what kind of ID a chat ID is, by its prefix:
// oc_ a chat, ou_ a user's open_id, on_ a union_id, an address an email.
func receiveIDType(id string) string {
	switch {
	case strings.HasPrefix(id, "ou_"):
		return "open_id"
	case strings.HasPrefix(id, "on_"):
		return "union_id"
	case strings.Contains(id, "@"):
		return "email"
	}
	return "chat_id"
}

// message sends one message to chat, or, with replyTo, as a reply to that
// message in its chat
// (https://open.feishu.cn/document/server-docs/im-v1/message/reply).
func (f *Feishu) message(ctx context.Context, chat, replyTo, msgType string, content any) error {
	c, _ := json.Marshal(content)
	body, _ := json.Marshal(map[string]string{"receive_id": chat, "msg_type": msgType, "content": string(c)})
	u := f.acct.BaseURL + "/open-apis/im/v1/messages?receive_id_type=" + url.QueryEscape(receiveIDType(chat))
	if replyTo != "" {
		body, _ = json.Marshal(map[string]string{"msg_type": msgType, "content": string(c)})
		u = f.acct.BaseURL + "/open-apis/im/v1/messages/" + url.PathEscape(replyTo) + "/reply"
	}
	return f.call(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, u, body)
	}, nil)
}

// feishuFileType is the file_type im/v1/files wants.
func feishuFileType(ext string) string {
	switch ext {
	case "pdf":
		return "pdf"
	case "doc", "docx":
		return "doc"
	case "xls", "xlsx":
		return "xls"
	case "ppt", "pptx":
		return "ppt"
	}
	return "stream"
}

func (f *Feishu) file(ctx context.Context, chat, replyTo string, file *File) error {
	if file.Kind == Image {
		var d struct {
			ImageKey string `json:"image_key"`
		}
		err := f.call(ctx, func(ctx context.Context) (*http.Request, error) {
			return newForm(part{Name: "image_type", Value: "message"}, part{Name: "image", File: file}).
				request(ctx, f.acct.BaseURL+"/open-apis/im/v1/images")
		}, &d)
		if err != nil {
			return fmt.Errorf("upload: %w", err)
		}
		return f.message(ctx, chat, replyTo, "image", map[string]string{"image_key": d.ImageKey})
	}
	var d struct {
		FileKey string `json:"file_key"`
	}
	err := f.call(ctx, func(ctx context.Context) (*http.Request, error) {
		return newForm(part{Name: "file_type", Value: feishuFileType(file.Ext)}, part{Name: "file_name", Value: file.Name}, part{Name: "file", File: file}).
			request(ctx, f.acct.BaseURL+"/open-apis/im/v1/files")
	}, &d)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	return f.message(ctx, chat, replyTo, "file", map[string]string{"file_key": d.FileKey})
}

// Send posts the caption as a text message, then each file; each is a
// reply to m.ReplyTo when it names a message ("om_...").
func (f *Feishu) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	reply := ""
	if strings.HasPrefix(m.ReplyTo, "om_") {
		reply = m.ReplyTo
	}
	return sendEach(ctx, m, func(ctx context.Context, s string) error {
		return f.message(ctx, chat, reply, "text", map[string]string{"text": s})
	}, func(ctx context.Context, file *File) error { return f.file(ctx, chat, reply, file) })
}

var _ Sender = (*Feishu)(nil)
