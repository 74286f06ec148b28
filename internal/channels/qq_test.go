package channels

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// qqFake checks requests as the QQ bot API would: the app access token
// (expires_in as a string), "QQBot <token>" on every call, base64 file_data
// with a file_type, then msg_type 7 carrying the upload's file_info.
type qqFake struct {
	t        *testing.T
	mu       sync.Mutex
	tokens   int
	valid    []string
	limitNxt int
	uploads  []map[string]any
	messages []map[string]any
	paths    []string
}

func (f *qqFake) handler(w http.ResponseWriter, r *http.Request) {
	t := f.t
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/app/getAppAccessToken" {
		var b map[string]string
		readJSON(t, r, &b)
		if b["appId"] != "1020" || b["clientSecret"] != "qq-secret-123" {
			writeJSON(w, 200, map[string]any{"code": 100016, "message": "invalid appid or secret"})
			return
		}
		f.tokens++
		tok := fmt.Sprintf("qq-tok-%d", f.tokens)
		f.valid = append(f.valid, tok)
		writeJSON(w, 200, map[string]any{"access_token": tok, "expires_in": "7200"})
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "QQBot ")
	if !ok || !slices.Contains(f.valid, tok) || r.Header.Get("X-Union-Appid") != "1020" {
		writeJSON(w, 401, map[string]any{"code": 11244, "message": "token not exist or expire"})
		return
	}
	if f.limitNxt > 0 {
		f.limitNxt--
		w.Header().Set("Retry-After", "3")
		writeJSON(w, 429, map[string]any{"code": 22009, "message": "msg limit exceed"})
		return
	}
	f.paths = append(f.paths, r.URL.Path)
	if strings.Contains(r.URL.Path, "NOTMEMBER") {
		writeJSON(w, 403, map[string]any{"code": 304003, "message": "bot not in group"})
		return
	}
	var b map[string]any
	readJSON(t, r, &b)
	switch {
	case strings.HasSuffix(r.URL.Path, "/files"):
		data, err := base64.StdEncoding.DecodeString(fmt.Sprint(b["file_data"]))
		if err != nil || b["srv_send_msg"] != false {
			t.Errorf("upload body: %v (%v)", b, err)
		}
		b["file_data"] = string(data)
		f.uploads = append(f.uploads, b)
		writeJSON(w, 200, map[string]any{"file_uuid": "u1", "file_info": fmt.Sprintf("info-%d", len(f.uploads)), "ttl": 3600})
	case strings.HasSuffix(r.URL.Path, "/messages"):
		if _, ok := b["msg_seq"].(float64); !ok {
			t.Errorf("message without msg_seq: %v", b)
		}
		delete(b, "msg_seq")
		f.messages = append(f.messages, b)
		writeJSON(w, 200, map[string]any{"id": "m1", "timestamp": "2026-01-02T03:04:05+08:00"})
	default:
		t.Errorf("unexpected path %s", r.URL.Path)
		writeJSON(w, 404, map[string]any{"code": 404, "message": "not found"})
	}
}

func TestQQ(t *testing.T) {
	qf := &qqFake{t: t}
	srv := fake(t, qf.handler)
	clk := newClock()
	qq := NewQQ(QQAccount{AppID: "1020", AppSecret: "qq-secret-123", BaseURL: srv.URL, TokenURL: srv.URL + "/app/getAppAccessToken"}, testOptions(clk))
	ctx := context.Background()
	png := memFile(t, "a.png", []byte("png-bytes"))
	mp4 := memFile(t, "clip.mp4", []byte("mp4-bytes-0123"))

	mustSend(t, qq.Send(ctx, &Message{Target: Target{ChatID: "GROUPOPENID"}, Caption: "look", Files: []*File{png, mp4}}))
	if got := fmt.Sprint(qf.uploads); got != "[map[file_data:png-bytes file_type:1 srv_send_msg:false] map[file_data:mp4-bytes-0123 file_type:2 srv_send_msg:false]]" {
		t.Errorf("uploads: %s", got)
	}
	if got := fmt.Sprint(qf.messages); got != "[map[content:look msg_type:0] map[content:  media:map[file_info:info-1] msg_type:7] map[content:  media:map[file_info:info-2] msg_type:7]]" {
		t.Errorf("messages: %s", got)
	}
	if qf.paths[0] != "/v2/groups/GROUPOPENID/messages" {
		t.Errorf("paths %v", qf.paths)
	}

	t.Run("one-to-one", func(t *testing.T) {
		mustSend(t, qq.Send(ctx, &Message{Target: Target{ChatID: "user:USEROPENID"}, Files: []*File{png}}))
		if got := qf.paths[len(qf.paths)-2:]; !slices.Equal(got, []string{"/v2/users/USEROPENID/files", "/v2/users/USEROPENID/messages"}) {
			t.Errorf("paths %v", got)
		}
	})
	t.Run("token refreshed after expiry", func(t *testing.T) {
		clk.Advance(7200 * time.Second)
		mustSend(t, qq.Send(ctx, &Message{Target: Target{ChatID: "G"}, Caption: "x"}))
		if qf.tokens != 2 {
			t.Errorf("tokens %d, want 2", qf.tokens)
		}
	})
	t.Run("401 fetches a new token", func(t *testing.T) {
		qf.mu.Lock()
		qf.valid = nil
		qf.mu.Unlock()
		mustSend(t, qq.Send(ctx, &Message{Target: Target{ChatID: "G"}, Caption: "x"}))
		if qf.tokens != 3 {
			t.Errorf("tokens %d, want 3", qf.tokens)
		}
	})
	t.Run("429 then success", func(t *testing.T) {
		qf.mu.Lock()
		qf.limitNxt = 2
		qf.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, qq.Send(ctx, &Message{Target: Target{ChatID: "G"}, Files: []*File{png}}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{3 * time.Second, 3 * time.Second}) {
			t.Errorf("waits %v", s)
		}
	})
	t.Run("types", func(t *testing.T) {
		if r := qq.Check(memFile(t, "r.pdf", []byte("x"))); !strings.Contains(r, "only images") {
			t.Errorf("pdf: %q", r)
		}
		if r := qq.Check(&File{Name: "b.jpg", Ext: "jpg", Kind: Image, Size: 11 << 20}); !strings.Contains(r, "10 MB") {
			t.Errorf("11 MB jpg: %q", r)
		}
	})
	t.Run("API error reported", func(t *testing.T) {
		out := qq.Send(ctx, &Message{Target: Target{ChatID: "NOTMEMBER"}, Files: []*File{png}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "bot not in group") {
			t.Errorf("got %v, want the API's refusal", out.Files[0])
		}
	})
}
