package channels

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// wecomFake answers as WeCom documents: gettoken with corpid and
// corpsecret (https://developer.work.weixin.qq.com/document/path/91039),
// access_token (app) or key (robot) in the query; media/upload and the
// robot's webhook/upload_media with a "media" file part carrying filename
// and filelength, more than 5 bytes ("所有文件size必须大于5个字节", answered
// 40006 otherwise), images (jpg, png) and videos (mp4) up to 10 MB and
// files up to 20 MB, a robot uploading only file or voice
// (https://developer.work.weixin.qq.com/document/path/90253, 91770);
// message/send (https://developer.work.weixin.qq.com/document/path/90236),
// where recipients the app cannot reach (here user IDs starting with
// "ghost", party and tag 999) come back in invaliduser, invalidparty and
// invalidtag with errcode 0 while the others get the message, and 81013
// when none can; and webhook/send (91770) with msgtype text, image, file or video, text
// content at most 2048 bytes (answered 40058 beyond), a robot's inline
// image at most 2 MB before base64 with its MD5, and a robot's messages at
// most 20 a minute (answered 45009 beyond), counted on the test's clock.
type wecomFake struct {
	t        *testing.T
	now      func() time.Time
	mu       sync.Mutex
	tokens   int
	valid    []string
	limitNxt int
	uploads  map[string]string
	sends    []string
	robotAt  []time.Time // the robot's messages, for its 20 a minute
}

// robotFull reports whether the robot has sent 20 messages in the last
// minute, and records one more when not.
func (f *wecomFake) robotFull() bool {
	now := f.now()
	var recent []time.Time
	for _, at := range f.robotAt {
		if now.Sub(at) < time.Minute {
			recent = append(recent, at)
		}
	}
	f.robotAt = recent
	if len(recent) >= 20 {
		return true
	}
	f.robotAt = append(f.robotAt, now)
	return false
}

// wecomUploadOK applies the upload limits; "" is fine.
func wecomUploadOK(robot bool, typ string, size int) string {
	limit := map[string]int{"image": 10 << 20, "video": 10 << 20, "voice": 2 << 20, "file": 20 << 20}[typ]
	switch {
	case limit == 0 || (robot && typ != "file" && typ != "voice"):
		return "invalid media type"
	case size <= 5:
		return "invalid file size: must be more than 5 bytes"
	case size > limit:
		return "invalid file size"
	}
	return ""
}

func (f *wecomFake) handler(w http.ResponseWriter, r *http.Request) {
	t := f.t
	f.mu.Lock()
	defer f.mu.Unlock()
	checkUA(t, r)
	q := r.URL.Query()
	robot := strings.HasPrefix(r.URL.Path, "/cgi-bin/webhook/")
	switch {
	case r.URL.Path == "/cgi-bin/gettoken":
		if q.Get("corpid") != "ww-corp" || q.Get("corpsecret") != "wecom-secret-123" {
			writeJSON(w, 200, map[string]any{"errcode": 40001, "errmsg": "invalid credential"})
			return
		}
		f.tokens++
		tok := fmt.Sprintf("wc-tok-%d", f.tokens)
		f.valid = append(f.valid, tok)
		writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok", "access_token": tok, "expires_in": 7200})
		return
	case robot && q.Get("key") != "robot-key-123":
		writeJSON(w, 200, map[string]any{"errcode": 93000, "errmsg": "invalid webhook url"})
		return
	case !robot && !slices.Contains(f.valid, q.Get("access_token")):
		writeJSON(w, 200, map[string]any{"errcode": 42001, "errmsg": "access_token expired"})
		return
	}
	if f.limitNxt > 0 {
		f.limitNxt--
		writeJSON(w, 200, map[string]any{"errcode": 45009, "errmsg": "api freq out of limit"})
		return
	}
	switch r.URL.Path {
	case "/cgi-bin/media/upload", "/cgi-bin/webhook/upload_media":
		fd := readForm(t, r)
		data := fd.Files["media"]
		if !strings.Contains(fd.Headers["media"], fmt.Sprintf("filelength=%d", len(data))) {
			t.Errorf("media part %q lacks filelength=%d", fd.Headers["media"], len(data))
		}
		if why := wecomUploadOK(robot, q.Get("type"), len(data)); why != "" {
			code := 40004
			if strings.HasPrefix(why, "invalid file size") {
				code = 40006
			}
			writeJSON(w, 200, map[string]any{"errcode": code, "errmsg": why})
			return
		}
		id := fmt.Sprintf("%s-%d", q.Get("type"), len(f.uploads))
		f.uploads[id] = string(data)
		writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok", "type": q.Get("type"), "media_id": id, "created_at": "1"})
	case "/cgi-bin/message/send", "/cgi-bin/webhook/send":
		var b map[string]any
		readJSON(t, r, &b)
		mt := fmt.Sprint(b["msgtype"])
		if id, _ := b["agentid"].(float64); !robot && id != 1000002 {
			t.Errorf("agentid %v", b["agentid"])
		}
		if why := wecomMessageOK(mt, b[mt]); why != "" {
			writeJSON(w, 200, map[string]any{"errcode": 40058, "errmsg": why})
			return
		}
		if robot && f.robotFull() {
			writeJSON(w, 200, map[string]any{"errcode": 45009, "errmsg": "api freq out of limit"})
			return
		}
		if !robot {
			if answer, ok := wecomRecipients(b); !ok {
				writeJSON(w, 200, answer)
				return
			} else if len(answer) > 2 {
				f.sends = append(f.sends, fmt.Sprintf("%s to=%v%v %s %v", r.URL.Path, b["touser"], b["toparty"], mt, b[mt]))
				writeJSON(w, 200, answer)
				return
			}
		}
		f.sends = append(f.sends, fmt.Sprintf("%s to=%v%v %s %v", r.URL.Path, b["touser"], b["toparty"], mt, b[mt]))
		writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok"})
	default:
		t.Errorf("unexpected path %s", r.URL.Path)
		w.WriteHeader(404)
	}
}

// wecomRecipients sorts message/send's touser, toparty and totag ("|"
// separated) into those the app reaches and those it does not (user IDs
// starting with "ghost", party and tag 999). ok is false when it reaches
// none (81013); the answer names the invalid ones, lower-cased as WeCom
// returns user IDs.
func wecomRecipients(b map[string]any) (answer map[string]any, ok bool) {
	answer = map[string]any{"errcode": 0, "errmsg": "ok"}
	valid := 0
	for field, invalid := range map[string]string{"touser": "invaliduser", "toparty": "invalidparty", "totag": "invalidtag"} {
		s, _ := b[field].(string)
		var bad []string
		for _, id := range strings.Split(s, "|") {
			switch {
			case id == "":
			case strings.HasPrefix(strings.ToLower(id), "ghost") || id == "999":
				bad = append(bad, strings.ToLower(id))
			default:
				valid++
			}
		}
		if len(bad) > 0 {
			answer[invalid] = strings.Join(bad, "|")
		}
	}
	if valid == 0 {
		answer["errcode"], answer["errmsg"] = 81013, "user & party & tag all invalid"
		return answer, false
	}
	return answer, true
}

// wecomMessageOK applies the message rules; "" is fine.
func wecomMessageOK(mt string, content any) string {
	c, _ := content.(map[string]any)
	switch mt {
	case "text":
		s, _ := c["content"].(string)
		if s == "" || len(s) > 2048 {
			return fmt.Sprintf("content size out of limit: %d bytes, at most 2048", len(s))
		}
	case "image":
		if id, _ := c["media_id"].(string); id != "" {
			return ""
		}
		b64, _ := c["base64"].(string)
		data, err := base64.StdEncoding.DecodeString(b64)
		sum := md5.Sum(data)
		if err != nil || len(data) > 2<<20 || c["md5"] != hex.EncodeToString(sum[:]) {
			return "invalid image: base64 over 2 MB or md5 mismatch"
		}
	case "file", "video", "voice":
		if id, _ := c["media_id"].(string); id == "" {
			return "missing media_id"
		}
	default:
		return "invalid msgtype " + mt
	}
	return ""
}

func TestWeComApp(t *testing.T) {
	clk := newClock()
	wf := &wecomFake{t: t, now: clk.Now, uploads: map[string]string{}}
	srv := fake(t, wf.handler)
	wc := NewWeCom(WeComAccount{CorpID: "ww-corp", Secret: "wecom-secret-123", AgentID: 1000002, BaseURL: srv.URL}, testOptions(clk))
	ctx := context.Background()
	png := memFile(t, "a.png", []byte("png-image"))
	mp4 := memFile(t, "b.mp4", []byte("mp4-video"))
	pdf := memFile(t, "c.pdf", []byte("pdf-file"))

	mustSend(t, wc.Send(ctx, &Message{Target: Target{ChatID: "zhangsan"}, Caption: "files", Files: []*File{png, mp4, pdf}}))
	want := []string{
		"/cgi-bin/message/send to=zhangsan<nil> text map[content:files]",
		"/cgi-bin/message/send to=zhangsan<nil> image map[media_id:image-0]",
		"/cgi-bin/message/send to=zhangsan<nil> video map[media_id:video-1]",
		"/cgi-bin/message/send to=zhangsan<nil> file map[media_id:file-2]",
	}
	if !slices.Equal(wf.sends, want) {
		t.Errorf("sends:\n%s", strings.Join(wf.sends, "\n"))
	}
	if wf.uploads["video-1"] != "mp4-video" {
		t.Errorf("uploads %v", wf.uploads)
	}
	t.Run("party", func(t *testing.T) {
		mustSend(t, wc.Send(ctx, &Message{Target: Target{ChatID: "party:7"}, Caption: "x"}))
		if got := wf.sends[len(wf.sends)-1]; !strings.Contains(got, "to=<nil>7 text") {
			t.Errorf("got %s", got)
		}
	})
	t.Run("no recipient reached is a failure", func(t *testing.T) {
		out := wc.Send(ctx, &Message{Target: Target{ChatID: "ghost"}, Caption: "x"})
		if out.Caption == nil || !strings.Contains(out.Caption.Error(), "81013") || !strings.Contains(out.Caption.Error(), "Next:") {
			t.Errorf("got %v", out.Caption)
		}
	})
	t.Run("token refreshed after expiry", func(t *testing.T) {
		clk.Advance(2 * time.Hour)
		mustSend(t, wc.Send(ctx, &Message{Target: Target{ChatID: "zhangsan"}, Caption: "x"}))
		if wf.tokens != 2 {
			t.Errorf("tokens %d, want 2", wf.tokens)
		}
	})
	t.Run("expired token fetched again", func(t *testing.T) {
		wf.mu.Lock()
		wf.valid = nil
		wf.mu.Unlock()
		mustSend(t, wc.Send(ctx, &Message{Target: Target{ChatID: "zhangsan"}, Caption: "x"}))
		if wf.tokens != 3 {
			t.Errorf("tokens %d, want 3", wf.tokens)
		}
	})
	t.Run("frequency limit then success", func(t *testing.T) {
		wf.mu.Lock()
		wf.limitNxt = 1
		wf.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, wc.Send(ctx, &Message{Target: Target{ChatID: "zhangsan"}, Files: []*File{pdf}}))
		// 45009 is a per-minute limit: a whole minute, as this app
		// sent nothing the robot window counts.
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{time.Minute}) {
			t.Errorf("waits %v", s)
		}
	})
	t.Run("long text in parts of at most 2048 bytes", func(t *testing.T) {
		n := len(wf.sends)
		mustSend(t, wc.Send(ctx, &Message{Target: Target{ChatID: "zhangsan"}, Caption: strings.Repeat("长", 1000)}))
		if got := len(wf.sends) - n; got != 2 {
			t.Errorf("%d messages, want 2 (3000 bytes)", got)
		}
	})
	t.Run("limits", func(t *testing.T) {
		if r := wc.Check(memFile(t, "t.txt", []byte("abc"))); !strings.Contains(r, "5 bytes") {
			t.Errorf("3 bytes: %q", r)
		}
		if r := wc.Check(&File{Name: "z.zip", Ext: "zip", Size: 21 << 20}); !strings.Contains(r, "20 MB") {
			t.Errorf("21 MB: %q", r)
		}
	})
}

func TestWeComRobot(t *testing.T) {
	clk := newClock()
	wf := &wecomFake{t: t, now: clk.Now, uploads: map[string]string{}}
	srv := fake(t, wf.handler)
	wc := NewWeCom(WeComAccount{WebhookURL: srv.URL + "/cgi-bin/webhook/send?key=robot-key-123"}, testOptions(clk))
	png := memFile(t, "a.png", []byte("png-image"))
	pdf := memFile(t, "c.pdf", []byte("pdf-file"))
	mustSend(t, wc.Send(context.Background(), &Message{Caption: "hello", Files: []*File{png, pdf}}))
	sum := md5.Sum([]byte("png-image"))
	want := []string{
		"/cgi-bin/webhook/send to=<nil><nil> text map[content:hello]",
		fmt.Sprintf("/cgi-bin/webhook/send to=<nil><nil> image map[base64:%s md5:%s]", base64.StdEncoding.EncodeToString([]byte("png-image")), hex.EncodeToString(sum[:])),
		"/cgi-bin/webhook/send to=<nil><nil> file map[media_id:file-0]",
	}
	if !slices.Equal(wf.sends, want) {
		t.Errorf("sends:\n%s", strings.Join(wf.sends, "\n"))
	}
	if wf.tokens != 0 {
		t.Errorf("a robot fetched %d tokens", wf.tokens)
	}
	bad := NewWeCom(WeComAccount{WebhookURL: srv.URL + "/cgi-bin/webhook/send?key=wrong"}, testOptions(clk))
	if out := bad.Send(context.Background(), &Message{Files: []*File{pdf}}); out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "93000") {
		t.Errorf("wrong key: %v", out.Files[0])
	}
}

// TestWeComRobotLimits: a long Chinese caption goes as several messages
// of at most 2048 bytes, cut on rune boundaries, and the robot's 20
// messages a minute are waited for within the call's deadline, or the
// outcome says when to try again.
func TestWeComRobotLimits(t *testing.T) {
	clk := newClock()
	wf := &wecomFake{t: t, now: clk.Now, uploads: map[string]string{}}
	srv := fake(t, wf.handler)
	robot := func() *WeCom {
		return NewWeCom(WeComAccount{WebhookURL: srv.URL + "/cgi-bin/webhook/send?key=robot-key-123"}, testOptions(clk))
	}
	ctx := context.Background()
	caption := strings.Repeat("季", 3000)

	t.Run("3000 Chinese characters", func(t *testing.T) {
		wc := robot()
		mustSend(t, wc.Send(ctx, &Message{Caption: caption}))
		var joined strings.Builder
		for _, s := range wf.sends {
			c := strings.TrimSuffix(strings.TrimPrefix(s, "/cgi-bin/webhook/send to=<nil><nil> text map[content:"), "]")
			if len(c) > 2048 || !utf8.ValidString(c) {
				t.Errorf("a part of %d bytes (valid UTF-8: %v)", len(c), utf8.ValidString(c))
			}
			joined.WriteString(c)
		}
		if len(wf.sends) != 5 || joined.String() != caption {
			t.Errorf("%d parts; joined equal: %v", len(wf.sends), joined.String() == caption)
		}
	})
	t.Run("20 a minute: waits for room", func(t *testing.T) {
		clk.Advance(time.Hour)
		wc := robot()
		n := len(clk.Sleeps())
		var files []*File
		for i := range 10 {
			files = append(files, memFile(t, fmt.Sprintf("f%d.png", i), []byte("png-image")))
		}
		// 5 caption parts + 10 images, then 10 more images: the 21st
		// message waits for the first one's minute to end.
		mustSend(t, wc.Send(ctx, &Message{Caption: caption, Files: files}))
		mustSend(t, wc.Send(ctx, &Message{Files: files}))
		if s := clk.Sleeps()[n:]; len(s) != 1 || s[0] != time.Minute {
			t.Errorf("waits %v, want one of a minute", s)
		}
	})
	t.Run("45009 from messages sent elsewhere waits a minute", func(t *testing.T) {
		clk.Advance(time.Hour)
		wf.mu.Lock()
		wf.robotAt = nil
		for range 20 {
			wf.robotAt = append(wf.robotAt, clk.Now())
		}
		wf.mu.Unlock()
		wc := robot()
		n := len(clk.Sleeps())
		mustSend(t, wc.Send(ctx, &Message{Caption: "after the others"}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{time.Minute}) {
			t.Errorf("waits %v, want [1m]", s)
		}
	})
	t.Run("a wait beyond the deadline says when to try again", func(t *testing.T) {
		clk.Advance(time.Hour)
		wc := robot()
		var files []*File
		for i := range 20 {
			files = append(files, memFile(t, fmt.Sprintf("g%d.png", i), []byte("png-image")))
		}
		mustSend(t, wc.Send(ctx, &Message{Files: files}))
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out := wc.Send(dctx, &Message{Files: files[:1]})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "20 messages a minute") || !strings.Contains(out.Files[0].Error(), "Next: try again in 1m0s") {
			t.Errorf("got %v", out.Files[0])
		}
	})
}

// TestWeComPartialDelivery: message/send answers errcode 0 with
// invaliduser, invalidparty and invalidtag when some recipients cannot get
// the message: the others did, so the part counts as sent, and the outcome
// names who did not get it and what to do. 81013, no recipient at all, is
// a failure that says what to check.
// Doc: https://developer.work.weixin.qq.com/document/path/90236
func TestWeComPartialDelivery(t *testing.T) {
	clk := newClock()
	wf := &wecomFake{t: t, now: clk.Now, uploads: map[string]string{}}
	srv := fake(t, wf.handler)
	wc := NewWeCom(WeComAccount{CorpID: "ww-corp", Secret: "wecom-secret-123", AgentID: 1000002, BaseURL: srv.URL}, testOptions(clk))
	ctx := context.Background()
	pdf := memFile(t, "c.pdf", []byte("pdf-file"))

	out := wc.Send(ctx, &Message{Target: Target{ChatID: "zhangsan|GhostA|ghostB"}, Caption: "numbers", Files: []*File{pdf}})
	mustSend(t, out)
	if len(out.Notes) != 2 {
		t.Fatalf("notes %q, want one for the message and one for c.pdf", out.Notes)
	}
	for i, part := range []string{"message", "c.pdf"} {
		n := out.Notes[i]
		if !strings.HasPrefix(n, part+":") || !strings.Contains(n, "ghosta, ghostb") || !strings.Contains(n, "Next:") {
			t.Errorf("note %q, want %s: who did not get it and what to do", n, part)
		}
	}
	out = wc.Send(ctx, &Message{Target: Target{ChatID: "party:999"}, Caption: "x"})
	if out.Caption == nil || !strings.Contains(out.Caption.Error(), "81013") || !strings.Contains(out.Caption.Error(), "Next:") {
		t.Errorf("no party reached: %v, want 81013 and what to do", out.Caption)
	}
	if len(out.Notes) != 0 {
		t.Errorf("notes for a failed part: %q", out.Notes)
	}
}

// TestWeComFileSize: WeCom takes media of more than 5 bytes only, so a
// file of 5 bytes or fewer is refused before the upload, for apps and
// robots alike.
// Doc: https://developer.work.weixin.qq.com/document/path/90253
func TestWeComFileSize(t *testing.T) {
	clk := newClock()
	app := NewWeCom(WeComAccount{CorpID: "ww-corp", Secret: "wecom-secret-123", AgentID: 1000002, BaseURL: "http://127.0.0.1:1"}, testOptions(clk))
	robot := NewWeCom(WeComAccount{WebhookURL: "http://127.0.0.1:1/cgi-bin/webhook/send?key=robot-key-123"}, testOptions(clk))
	for _, wc := range []*WeCom{app, robot} {
		for _, data := range []string{"abc", "abcde"} {
			if r := wc.Check(memFile(t, "t.txt", []byte(data))); !strings.Contains(r, "more than 5 bytes") {
				t.Errorf("%d bytes: %q, want a refusal naming more than 5 bytes", len(data), r)
			}
		}
		if r := wc.Check(memFile(t, "t.txt", []byte("abcdef"))); r != "" {
			t.Errorf("6 bytes: %q", r)
		}
	}
}
