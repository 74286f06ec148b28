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
)

// wecomFake checks requests as WeCom would: gettoken with corpid and
// corpsecret, access_token (app) or key (robot) in the query, a "media"
// file part with filename and filelength, and the message JSON.
type wecomFake struct {
	t        *testing.T
	mu       sync.Mutex
	tokens   int
	valid    []string
	limitNxt int
	uploads  map[string]string
	sends    []string
}

func (f *wecomFake) handler(w http.ResponseWriter, r *http.Request) {
	t := f.t
	f.mu.Lock()
	defer f.mu.Unlock()
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
		f.sends = append(f.sends, fmt.Sprintf("%s to=%v%v %s %v", r.URL.Path, b["touser"], b["toparty"], mt, b[mt]))
		if b["touser"] == "ghost" {
			writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok", "invaliduser": "ghost"})
			return
		}
		writeJSON(w, 200, map[string]any{"errcode": 0, "errmsg": "ok"})
	default:
		t.Errorf("unexpected path %s", r.URL.Path)
		w.WriteHeader(404)
	}
}

func TestWeComApp(t *testing.T) {
	wf := &wecomFake{t: t, uploads: map[string]string{}}
	srv := fake(t, wf.handler)
	clk := newClock()
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
	t.Run("unknown user is a failure", func(t *testing.T) {
		out := wc.Send(ctx, &Message{Target: Target{ChatID: "ghost"}, Caption: "x"})
		if out.Caption == nil || !strings.Contains(out.Caption.Error(), "ghost") {
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
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{time.Second}) {
			t.Errorf("waits %v", s)
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
	wf := &wecomFake{t: t, uploads: map[string]string{}}
	srv := fake(t, wf.handler)
	clk := newClock()
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
