package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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

// DingTalk's media (https://open.dingtalk.com/document/orgapp/upload-media-files):
// images jpg, gif, png, bmp; videos mp4; files doc, docx, xls, xlsx, ppt,
// pptx, zip, pdf, rar; each at most 20 MB. The robot sends them as
// sampleImageMsg, sampleVideo and sampleFile
// (https://open.dingtalk.com/document/development/robot-message-type).
const dingtalkMax = 20 << 20

// dingtalkFiles are the types the robot's file message (sampleFile) takes,
// in its doc's order: fewer than media/upload takes (no xls, ppt or pptx).
// Those others are refused rather than sent as a link: the only links
// this service makes (TOOLSVC_PUBLIC_URL) expire within minutes, made for
// platforms that fetch a file at once, not for people who open a chat
// later.
var dingtalkFiles = []string{"xlsx", "pdf", "zip", "rar", "doc", "docx"}

// dingtalkNotFile is why a document of another type cannot go.
var dingtalkNotFile = "dingtalk's robot sends files only of type " + strings.Join(dingtalkFiles, ", ") +
	" (its file message, sampleFile, takes no other), beside images (png, jpg, gif, bmp) and mp4 videos. " +
	"Next: convert it (xls to xlsx, ppt or pptx to pdf) or put it in a zip archive, and send that"

// dingtalkKind is the media/upload type of f ("image", "video", "file"),
// or "" when DingTalk takes no file of f's type.
func dingtalkKind(f *File) string {
	switch {
	case f.Ext == "png" || f.Ext == "jpg" || f.Ext == "jpeg" || f.Ext == "gif" || f.Ext == "bmp":
		return "image"
	case f.Ext == "mp4":
		return "video"
	case slices.Contains(dingtalkFiles, f.Ext):
		return "file"
	}
	return ""
}

// Check applies DingTalk's limits: its types, 20 MB, and an mp4 whose
// duration can be read (the video message needs it).
func (d *DingTalk) Check(f *File) string {
	if why := limitFor("dingtalk", f, dingtalkMax, "files"); why != "" {
		return why
	}
	switch dingtalkKind(f) {
	case "":
		return dingtalkNotFile
	case "video":
		if _, err := mp4Duration(f.Content, f.Size); err != nil {
			return "dingtalk's video message needs the video's duration, which cannot be read from it (" + err.Error() + "). Next: check that it is a complete mp4, or put it in a zip archive"
		}
	}
	return ""
}

// DingTalk's error codes: an invalid or expired token (old API); over a
// rate limit, in the old API's and the new API's form
// (https://open.dingtalk.com/document/development/how-to-process-api-throttling-on-the-dingtalk-server):
// an app's calls to one API a second, and everyone's calls to one API a
// second. Both limits last a second.
const (
	dingtalkTokenInvalid = 40014
	dingtalkTokenExpired = 42001
	dingtalkAppQPS       = 90018
	dingtalkAPIQPS       = 90002
	dingtalkAppQPSCode   = "Forbidden.AccessDenied.QpsLimitForAppkeyAndApi"
	dingtalkAPIQPSCode   = "Forbidden.AccessDenied.QpsLimitForApi"
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
	switch {
	case dr.ErrCode == dingtalkAppQPS, dr.ErrCode == dingtalkAPIQPS, dr.Code == dingtalkAppQPSCode, dr.Code == dingtalkAPIQPSCode:
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

// upload puts f into DingTalk's media store as typ and returns its
// media_id.
func (d *DingTalk) upload(ctx context.Context, f *File, typ string) (string, error) {
	dr, err := d.call(ctx, func(ctx context.Context, tok string) (*http.Request, error) {
		return newForm(part{Name: "media", File: f}).request(ctx, d.acct.OAPIURL+"/media/upload?access_token="+url.QueryEscape(tok)+"&type="+typ)
	})
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	if dr.MediaID == "" {
		return "", d.api.errorf(0, "the upload returned no media_id")
	}
	return dr.MediaID, nil
}

func (d *DingTalk) file(ctx context.Context, chat string, f *File) error {
	typ := dingtalkKind(f)
	if typ == "" {
		return errors.New("not sent: " + dingtalkNotFile)
	}
	id, err := d.upload(ctx, f, typ)
	if err != nil {
		return err
	}
	switch typ {
	case "image":
		return d.robot(ctx, chat, "sampleImageMsg", map[string]string{"photoURL": id})
	case "video":
		return d.video(ctx, chat, f, id)
	}
	return d.robot(ctx, chat, "sampleFile", map[string]string{"mediaId": id, "fileName": f.Name, "fileType": f.Ext})
}

// video sends an uploaded mp4 as sampleVideo, which wants its duration
// (seconds, as a string), its type and a cover picture's media_id. toolsvc
// does not decode video, so the cover is a plain dark picture, uploaded
// with each video.
func (d *DingTalk) video(ctx context.Context, chat string, f *File, id string) error {
	dur, err := mp4Duration(f.Content, f.Size)
	if err != nil {
		return d.api.errorf(0, "the video's duration cannot be read: %v", err)
	}
	pic, err := d.upload(ctx, videoCover(), "image")
	if err != nil {
		return fmt.Errorf("cover picture: %w", err)
	}
	secs := max(int64((dur+time.Second-1)/time.Second), 1)
	return d.robot(ctx, chat, "sampleVideo", map[string]string{
		"duration": strconv.FormatInt(secs, 10), "videoMediaId": id, "videoType": "mp4", "picMediaId": pic,
	})
}

// videoCover is the cover sent with a video: a 320x180 dark grey JPEG.
func videoCover() *File {
	img := image.NewGray(image.Rect(0, 0, 320, 180))
	for i := range img.Pix {
		img.Pix[i] = 0x30
	}
	var b bytes.Buffer
	_ = jpeg.Encode(&b, img, &jpeg.Options{Quality: 60})
	return &File{Name: "cover.jpg", Ext: "jpg", Kind: Image, Size: int64(b.Len()), Content: bytes.NewReader(b.Bytes())}
}

// Send posts the caption as a text message, then each file. The robot's
// send APIs take no message to reply to, so m.ReplyTo is not used.
func (d *DingTalk) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	return sendEach(ctx, m, func(ctx context.Context, s string) error {
		return d.robot(ctx, chat, "sampleText", map[string]string{"content": s})
	}, func(ctx context.Context, f *File) error { return d.file(ctx, chat, f) })
}

var _ Sender = (*DingTalk)(nil)
