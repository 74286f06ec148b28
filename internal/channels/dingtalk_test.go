package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// dingtalkFake answers as DingTalk documents: the OAuth2 access token
// (https://open.dingtalk.com/document/orgapp/obtain-the-access_token-of-an-internal-app);
// media/upload with ?access_token=, a type and a "media" file field, whose
// type must fit: image jpg, gif, png, bmp; video mp4; file doc, docx, xls,
// xlsx, ppt, pptx, zip, pdf, rar; voice amr, mp3, wav; at most 20 MB
// (https://open.dingtalk.com/document/orgapp/upload-media-files); the
// robot APIs with x-acs-dingtalk-access-token, robotCode, a known msgKey
// and msgParam as a JSON string with that key's fields: sampleText
// content, sampleImageMsg photoURL, sampleFile mediaId, fileName and
// fileType, sampleVideo duration, videoMediaId, videoType and picMediaId
// (https://open.dingtalk.com/document/development/robot-message-type).
// sampleFile's fileType is one of those the message doc lists ("文件类型，
// 支持xlsx、pdf、zip、rar、doc、docx格式"), though media/upload takes more;
// the doc names no code for another, answered here as param.invalid.
// Its rate limits answer in the four documented forms
// (https://open.dingtalk.com/document/development/how-to-process-api-throttling-on-the-dingtalk-server).
type dingtalkFake struct {
	t        *testing.T
	mu       sync.Mutex
	tokens   int
	valid    []string
	limits   []string          // the next robot sends' or uploads' rate-limit answers, by code
	limit429 int               // robot sends answered with HTTP 429 and a Retry-After
	uploads  map[string]string // media_id -> content
	sends    []string          // path + body summary
}

// dingtalkUploadTypes are the extensions media/upload takes by type.
var dingtalkUploadTypes = map[string][]string{
	"image": {"jpg", "jpeg", "gif", "png", "bmp"}, "video": {"mp4"}, "voice": {"amr", "mp3", "wav"},
	"file": {"doc", "docx", "xls", "xlsx", "ppt", "pptx", "zip", "pdf", "rar"},
}

// dingtalkParams are the msgParam fields each robot message needs.
var dingtalkParams = map[string][]string{
	"sampleText": {"content"}, "sampleImageMsg": {"photoURL"}, "sampleFile": {"mediaId", "fileName", "fileType"},
	"sampleVideo": {"duration", "videoMediaId", "videoType", "picMediaId"},
}

// rateLimited answers the next queued rate-limit code, in its API's form:
// the old API's errcode with HTTP 200, the new one's code with HTTP 403.
func (f *dingtalkFake) rateLimited(w http.ResponseWriter, oldAPI bool) bool {
	if len(f.limits) == 0 {
		return false
	}
	code := f.limits[0]
	f.limits = f.limits[1:]
	if oldAPI {
		n := map[string]int{"app": 90018, "api": 90002}[code]
		writeJSON(w, 200, map[string]any{"errcode": n, "errmsg": "当前企业调用该接口的QPS已达到上限"})
	} else {
		c := map[string]string{"app": "Forbidden.AccessDenied.QpsLimitForAppkeyAndApi", "api": "Forbidden.AccessDenied.QpsLimitForApi"}[code]
		writeJSON(w, 403, map[string]any{"code": c, "message": "qps limit"})
	}
	return true
}

func (f *dingtalkFake) handler(w http.ResponseWriter, r *http.Request) {
	t := f.t
	f.mu.Lock()
	defer f.mu.Unlock()
	checkUA(t, r)
	switch {
	case r.URL.Path == "/v1.0/oauth2/accessToken":
		var b map[string]string
		readJSON(t, r, &b)
		if b["appKey"] != "ding-app" || b["appSecret"] != "ding-secret-123" {
			writeJSON(w, 400, map[string]any{"code": "invalidClientIdOrSecret", "message": "无效的clientId或clientSecret"})
			return
		}
		f.tokens++
		tok := fmt.Sprintf("ding-tok-%d", f.tokens)
		f.valid = append(f.valid, tok)
		writeJSON(w, 200, map[string]any{"accessToken": tok, "expireIn": 7200})
	case r.URL.Path == "/media/upload":
		if !slices.Contains(f.valid, r.URL.Query().Get("access_token")) {
			writeJSON(w, 200, map[string]any{"errcode": 40014, "errmsg": "不合法的access_token"})
			return
		}
		if f.rateLimited(w, true) {
			return
		}
		fd := readForm(t, r)
		typ := r.URL.Query().Get("type")
		name := fd.Filenames["media"]
		ext := strings.ToLower(name[strings.LastIndex(name, ".")+1:])
		if fd.Files["media"] == nil || !slices.Contains(dingtalkUploadTypes[typ], ext) || len(fd.Files["media"]) > 20<<20 {
			writeJSON(w, 200, map[string]any{"errcode": 40005, "errmsg": "不支持的文件格式"})
			return
		}
		id := fmt.Sprintf("@%s-%d", typ, len(f.uploads))
		f.uploads[id] = string(fd.Files["media"])
		writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok", "media_id": id, "type": typ, "created_at": 1})
	case strings.HasPrefix(r.URL.Path, "/v1.0/robot/"):
		if !slices.Contains(f.valid, r.Header.Get("x-acs-dingtalk-access-token")) {
			writeJSON(w, 401, map[string]any{"code": "InvalidAuthentication", "message": "不合法的access_token"})
			return
		}
		if f.limit429 > 0 {
			f.limit429--
			w.Header().Set("Retry-After", "2")
			writeJSON(w, 429, map[string]any{"code": "Throttling", "message": "too many requests"})
			return
		}
		if f.rateLimited(w, false) {
			return
		}
		var b map[string]any
		readJSON(t, r, &b)
		var param map[string]string
		if s, ok := b["msgParam"].(string); !ok || json.Unmarshal([]byte(s), &param) != nil {
			t.Errorf("msgParam %v is not a JSON string", b["msgParam"])
		}
		need, known := dingtalkParams[fmt.Sprint(b["msgKey"])]
		for _, k := range need {
			if param[k] == "" {
				known = false
			}
		}
		if !known {
			writeJSON(w, 400, map[string]any{"code": "param.invalid", "message": fmt.Sprintf("msgKey %v needs %v", b["msgKey"], need)})
			return
		}
		if b["msgKey"] == "sampleFile" && !slices.Contains([]string{"xlsx", "pdf", "zip", "rar", "doc", "docx"}, param["fileType"]) {
			writeJSON(w, 400, map[string]any{"code": "param.invalid", "message": "fileType " + param["fileType"] + " is not supported"})
			return
		}
		if b["robotCode"] != "ding-app" {
			t.Errorf("robotCode %v", b["robotCode"])
		}
		to := fmt.Sprint(b["openConversationId"])
		if r.URL.Path == "/v1.0/robot/oToMessages/batchSend" {
			to = fmt.Sprint(b["userIds"])
		}
		f.sends = append(f.sends, fmt.Sprintf("%s %s %s %v", strings.TrimPrefix(r.URL.Path, "/v1.0/robot/"), to, b["msgKey"], param))
		writeJSON(w, 200, map[string]any{"processQueryKey": "pqk"})
	default:
		t.Errorf("unexpected path %s", r.URL.Path)
		w.WriteHeader(404)
	}
}

func TestDingTalk(t *testing.T) {
	df := &dingtalkFake{t: t, uploads: map[string]string{}}
	srv := fake(t, df.handler)
	clk := newClock()
	dt := NewDingTalk(DingTalkAccount{ClientID: "ding-app", ClientSecret: "ding-secret-123", APIURL: srv.URL, OAPIURL: srv.URL}, testOptions(clk))
	ctx := context.Background()
	jpg := memFile(t, "p.jpg", []byte("jpg-data"))
	xlsx := memFile(t, "sheet.xlsx", []byte("xlsx-data"))
	mp4 := memFile(t, "clip.mp4", mp4Data(61))

	mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "cidGROUP=="}, Caption: "numbers", Files: []*File{jpg, xlsx, mp4}}))
	want := []string{
		"groupMessages/send cidGROUP== sampleText map[content:numbers]",
		"groupMessages/send cidGROUP== sampleImageMsg map[photoURL:@image-0]",
		"groupMessages/send cidGROUP== sampleFile map[fileName:sheet.xlsx fileType:xlsx mediaId:@file-1]",
		"groupMessages/send cidGROUP== sampleVideo map[duration:61 picMediaId:@image-3 videoMediaId:@video-2 videoType:mp4]",
	}
	if !slices.Equal(df.sends, want) {
		t.Errorf("sends:\n%s\nwant\n%s", strings.Join(df.sends, "\n"), strings.Join(want, "\n"))
	}
	if df.uploads["@image-0"] != "jpg-data" || df.uploads["@file-1"] != "xlsx-data" {
		t.Errorf("uploads %v", df.uploads)
	}
	t.Run("one-to-one", func(t *testing.T) {
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "manager4220"}, Caption: "hi"}))
		if got := df.sends[len(df.sends)-1]; got != "oToMessages/batchSend [manager4220] sampleText map[content:hi]" {
			t.Errorf("got %s", got)
		}
	})
	t.Run("token refreshed after expiry", func(t *testing.T) {
		clk.Advance(2 * time.Hour)
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "u1"}, Files: []*File{jpg}}))
		if df.tokens != 2 {
			t.Errorf("tokens %d, want 2", df.tokens)
		}
	})
	t.Run("invalid token fetched again", func(t *testing.T) {
		df.mu.Lock()
		df.valid = nil
		df.mu.Unlock()
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "u1"}, Files: []*File{jpg}}))
		if df.tokens != 3 {
			t.Errorf("tokens %d, want 3", df.tokens)
		}
	})
	t.Run("rate limit then success", func(t *testing.T) {
		// The four documented codes, each waited out for a second: two
		// on the upload (old API), two on the robot's send (new API).
		df.mu.Lock()
		df.limits = []string{"app", "api"}
		df.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "u1"}, Files: []*File{xlsx}}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{time.Second, time.Second}) {
			t.Errorf("waits %v, want [1s 1s]", s)
		}
		df.mu.Lock()
		df.limits = []string{"app", "api"}
		df.mu.Unlock()
		n = len(clk.Sleeps())
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "u1"}, Caption: "after the new API's limits"}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{time.Second, time.Second}) {
			t.Errorf("waits %v, want [1s 1s]", s)
		}
		df.mu.Lock()
		df.limit429 = 1
		df.mu.Unlock()
		n = len(clk.Sleeps())
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "u1"}, Caption: "after 429"}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{2 * time.Second}) {
			t.Errorf("waits %v, want [2s]", s)
		}
	})
	t.Run("bad secret", func(t *testing.T) {
		bad := NewDingTalk(DingTalkAccount{ClientID: "ding-app", ClientSecret: "nope", APIURL: srv.URL, OAPIURL: srv.URL}, testOptions(clk))
		out := bad.Send(ctx, &Message{Target: Target{ChatID: "u1"}, Caption: "x"})
		if out.Caption == nil || !strings.Contains(out.Caption.Error(), "invalidClientIdOrSecret") {
			t.Errorf("got %v", out.Caption)
		}
	})
	t.Run("limits", func(t *testing.T) {
		if r := dt.Check(&File{Name: "v.mp4", Ext: "mp4", Kind: Video, Size: 21 << 20}); !strings.Contains(r, "20 MB") {
			t.Errorf("21 MB: %q", r)
		}
		for _, name := range []string{"notes.txt", "data.csv", "a.7z", "song.mp3", "m.mov", "p.webp", "x.json"} {
			r := dt.Check(memFile(t, name, []byte("some data")))
			if !strings.Contains(r, "xlsx, pdf, zip, rar, doc, docx") || !strings.Contains(r, "zip archive") || !strings.Contains(r, "Next:") {
				t.Errorf("%s: %q", name, r)
			}
		}
		for _, name := range []string{"a.pdf", "b.rar", "c.docx", "d.bmp", "e.gif"} {
			if r := dt.Check(memFile(t, name, []byte("some data"))); r != "" {
				t.Errorf("%s: %q", name, r)
			}
		}
		if r := dt.Check(memFile(t, "broken.mp4", []byte("not a movie"))); !strings.Contains(r, "duration") {
			t.Errorf("broken mp4: %q", r)
		}
	})
}

// TestDingTalkSampleFileTypes: the robot's file message (sampleFile) takes
// only the types its doc lists, xlsx, pdf, zip, rar, doc and docx, though
// media/upload takes xls, ppt and pptx too. Those are refused before
// anything is uploaded, with the reason and what to do instead.
// Doc: https://open.dingtalk.com/document/development/robot-message-type
func TestDingTalkSampleFileTypes(t *testing.T) {
	df := &dingtalkFake{t: t, uploads: map[string]string{}}
	srv := fake(t, df.handler)
	clk := newClock()
	dt := NewDingTalk(DingTalkAccount{ClientID: "ding-app", ClientSecret: "ding-secret-123", APIURL: srv.URL, OAPIURL: srv.URL}, testOptions(clk))
	ctx := context.Background()
	for _, name := range []string{"a.xlsx", "b.pdf", "c.zip", "d.rar", "e.doc", "f.docx"} {
		f := memFile(t, name, []byte("some data"))
		if r := dt.Check(f); r != "" {
			t.Errorf("%s: refused: %q", name, r)
			continue
		}
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "cidGROUP=="}, Files: []*File{f}}))
	}
	for _, name := range []string{"old.xls", "deck.ppt", "deck.pptx"} {
		f := memFile(t, name, []byte("some data"))
		if r := dt.Check(f); !strings.Contains(r, "xlsx, pdf, zip, rar, doc, docx") || !strings.Contains(r, "Next:") {
			t.Errorf("%s: Check %q, want the types sampleFile takes and what to do", name, r)
		}
		// Send on its own refuses it too, before any request.
		n := len(df.uploads)
		out := dt.Send(ctx, &Message{Target: Target{ChatID: "cidGROUP=="}, Files: []*File{f}})
		if err := out.Files[0]; err == nil || !strings.Contains(err.Error(), "xlsx, pdf, zip, rar, doc, docx") {
			t.Errorf("%s: Send %v, want the types sampleFile takes", name, err)
		}
		if len(df.uploads) != n {
			t.Errorf("%s: uploaded although it cannot be sent", name)
		}
	}
}
