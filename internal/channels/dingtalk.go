package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DingTalkAccount is a DingTalk internal app with a robot: its Client ID
// (AppKey), Client Secret (AppSecret) and robot code (the Client ID when
// empty), the new API's base URL (https://api.dingtalk.com) and the old
// one's (https://oapi.dingtalk.com), where media are uploaded.
type DingTalkAccount struct {
	ClientID, ClientSecret, RobotCode, APIURL, OAPIURL string
}

// DingTalk uploads a file to media/upload with the app's access token,
// then has the robot send it: to a group (robot/groupMessages/send, chat
// ID an openConversationId, "cid...") or to a user
// (robot/oToMessages/batchSend, chat ID a userId).
type DingTalk struct {
	acct  DingTalkAccount
	api   api
	token tokenCache
}

// NewDingTalk returns the sender of one DingTalk robot.
func NewDingTalk(acct DingTalkAccount, o Options) *DingTalk {
	o = o.withDefaults()
	acct.APIURL = strings.TrimRight(acct.APIURL, "/")
	acct.OAPIURL = strings.TrimRight(acct.OAPIURL, "/")
	if acct.RobotCode == "" {
		acct.RobotCode = acct.ClientID
	}
	d := &DingTalk{acct: acct, api: api{name: "dingtalk", o: o}}
	d.api.limited = d.limited
	d.token = tokenCache{now: o.Now, fetch: d.fetchToken}
	return d
}

// DingTalk's media limits: 20 MB for images, videos and files.
const dingtalkMax = 20 << 20

// Check applies DingTalk's limits.
func (d *DingTalk) Check(f *File) string {
	return limitFor("dingtalk", f, dingtalkMax, "files")
}

// DingTalk's error codes: an invalid or expired token (old API), over the
// rate limit (old API, and the new API's 403 code).
const (
	dingtalkTokenInvalid = 40014
	dingtalkTokenExpired = 42001
	dingtalkRateLimited  = 90018
	dingtalkQPSCode      = "Forbidden.AccessDenied.QpsLimitForApi"
)

// dingtalkReply holds the fields of both APIs' answers.
type dingtalkReply struct {
	ErrCode int    `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
	MediaID string `json:"media_id"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Token   string `json:"accessToken"`
	Expire  int64  `json:"expireIn"`
}

func decodeDingTalk(r *reply) dingtalkReply {
	var d dingtalkReply
	_ = json.Unmarshal(r.Body, &d)
	return d
}

func (d *DingTalk) limited(r *reply) (time.Duration, bool) {
	dr := decodeDingTalk(r)
	if dr.ErrCode == dingtalkRateLimited || dr.Code == dingtalkQPSCode {
		return hint(r.Header.Get("Retry-After"), d.api.o.Now()), true
	}
	return 0, false
}

func (d *DingTalk) fetchToken(ctx context.Context) (string, time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"appKey": d.acct.ClientID, "appSecret": d.acct.ClientSecret})
	r, err := d.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, d.acct.APIURL+"/v1.0/oauth2/accessToken", body)
	}, nil)
	if err != nil {
		return "", 0, err
	}
	dr := decodeDingTalk(r)
	if r.Status != http.StatusOK || dr.Token == "" {
		return "", 0, d.api.errorf(r.Status, "access token: %s %s. Next: check TOOLSVC_DINGTALK_CLIENT_ID and TOOLSVC_DINGTALK_CLIENT_SECRET", dr.Code, dr.Message)
	}
	return dr.Token, time.Duration(dr.Expire) * time.Second, nil
}

// call makes a request with the token (build puts it where the API wants
// it); an answer calling the token invalid fetches it anew once.
func (d *DingTalk) call(ctx context.Context, build func(ctx context.Context, tok string) (*http.Request, error)) (dingtalkReply, error) {
	for try := 0; ; try++ {
		tok, err := d.token.get(ctx)
		if err != nil {
			return dingtalkReply{}, err
		}
		r, err := d.api.do(ctx, func(ctx context.Context) (*http.Request, error) { return build(ctx, tok) }, nil)
		if err != nil {
			return dingtalkReply{}, err
		}
		dr := decodeDingTalk(r)
		invalid := dr.ErrCode == dingtalkTokenInvalid || dr.ErrCode == dingtalkTokenExpired || r.Status == http.StatusUnauthorized
		switch {
		case invalid && try == 0:
			d.token.drop(tok)
			continue
		case r.Status < 200 || r.Status > 299:
			return dr, d.api.errorf(r.Status, "%s %s", dr.Code, dr.Message)
		case dr.ErrCode != 0:
			return dr, d.api.errorf(r.Status, "errcode %d: %s", dr.ErrCode, dr.ErrMsg)
		}
		return dr, nil
	}
}

// robot sends one robot message: msgKey with its msgParam.
func (d *DingTalk) robot(ctx context.Context, chat, msgKey string, param any) error {
	p, _ := json.Marshal(param)
	body := map[string]any{"robotCode": d.acct.RobotCode, "msgKey": msgKey, "msgParam": string(p)}
	u := d.acct.APIURL + "/v1.0/robot/oToMessages/batchSend"
	group, id := dingtalkChat(chat)
	if group {
		u = d.acct.APIURL + "/v1.0/robot/groupMessages/send"
		body["openConversationId"] = id
	} else {
		body["userIds"] = []string{id}
	}
	b, _ := json.Marshal(body)
	_, err := d.call(ctx, func(ctx context.Context, tok string) (*http.Request, error) {
		req, err := jsonRequest(ctx, http.MethodPost, u, b)
		if err == nil {
			req.Header.Set("x-acs-dingtalk-access-token", tok)
		}
		return req, err
	})
	return err
}

// dingtalkChat reads a chat ID: "group:ID" or an ID starting with "cid" is
// a group's openConversationId; "user:ID" or any other ID a userId.
func dingtalkChat(chat string) (group bool, id string) {
	if id, ok := strings.CutPrefix(chat, "group:"); ok {
		return true, id
	}
	if id, ok := strings.CutPrefix(chat, "user:"); ok {
		return false, id
	}
	return strings.HasPrefix(chat, "cid"), chat
}

func (d *DingTalk) file(ctx context.Context, chat string, f *File) error {
	typ := "file"
	switch {
	case f.Kind == Image && f.Ext != "webp":
		typ = "image"
	case f.Ext == "mp4":
		typ = "video"
	}
	dr, err := d.call(ctx, func(ctx context.Context, tok string) (*http.Request, error) {
		return newForm(part{Name: "media", File: f}).request(ctx, d.acct.OAPIURL+"/media/upload?access_token="+url.QueryEscape(tok)+"&type="+typ)
	})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if dr.MediaID == "" {
		return d.api.errorf(0, "the upload returned no media_id")
	}
	if typ == "image" {
		return d.robot(ctx, chat, "sampleImageMsg", map[string]string{"photoURL": dr.MediaID})
	}
	return d.robot(ctx, chat, "sampleFile", map[string]string{"mediaId": dr.MediaID, "fileName": f.Name, "fileType": f.Ext})
}

// Send posts the caption as a text message, then each file.
func (d *DingTalk) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	return sendEach(ctx, m, func(ctx context.Context, s string) error {
		return d.robot(ctx, chat, "sampleText", map[string]string{"content": s})
	}, func(ctx context.Context, f *File) error { return d.file(ctx, chat, f) })
}

var _ Sender = (*DingTalk)(nil)
