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

// feishuFake checks requests as the Open Platform would: the tenant token
// exchange, the Bearer token on every call, the multipart fields of the
// uploads and the message JSON whose content is itself a JSON string.
type feishuFake struct {
	t        *testing.T
	mu       sync.Mutex
	tokens   int      // tokens issued
	valid    []string // tokens the fake accepts
	limitNxt int      // answer this many next calls with 429
	messages []map[string]any
	uploads  map[string][]byte // image/file key -> content
}

func (f *feishuFake) handler(w http.ResponseWriter, r *http.Request) {
	t := f.t
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodPost {
		t.Errorf("%s %s, want POST", r.Method, r.URL.Path)
	}
	if r.URL.Path == "/open-apis/auth/v3/tenant_access_token/internal" {
		var b map[string]string
		readJSON(t, r, &b)
		if b["app_id"] != "cli_app" || b["app_secret"] != "app-secret-123" {
			writeJSON(w, 200, map[string]any{"code": 10014, "msg": "app secret invalid"})
			return
		}
		f.tokens++
		tok := fmt.Sprintf("t-%d", f.tokens)
		f.valid = append(f.valid, tok)
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": tok, "expire": 7200})
		return
	}
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !slices.Contains(f.valid, auth) {
		writeJSON(w, 400, map[string]any{"code": 99991663, "msg": "Invalid access token for authorization."})
		return
	}
	if f.limitNxt > 0 {
		f.limitNxt--
		w.Header().Set("x-ogw-ratelimit-reset", "2")
		writeJSON(w, 429, map[string]any{"code": 99991400, "msg": "request trigger frequency limit"})
		return
	}
	switch r.URL.Path {
	case "/open-apis/im/v1/images":
		fd := readForm(t, r)
		if fd.Values["image_type"] != "message" || fd.Files["image"] == nil {
			t.Errorf("images: fields %v, files %v", fd.Values, fd.Filenames)
		}
		key := fmt.Sprintf("img_%d", len(f.uploads))
		f.uploads[key] = fd.Files["image"]
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]string{"image_key": key}})
	case "/open-apis/im/v1/files":
		fd := readForm(t, r)
		if fd.Values["file_type"] == "" || fd.Values["file_name"] == "" || fd.Files["file"] == nil {
			t.Errorf("files: fields %v, files %v", fd.Values, fd.Filenames)
		}
		key := fmt.Sprintf("file_%s_%s", fd.Values["file_type"], fd.Values["file_name"])
		f.uploads[key] = fd.Files["file"]
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]string{"file_key": key}})
	case "/open-apis/im/v1/messages":
		var b map[string]any
		readJSON(t, r, &b)
		content, _ := b["content"].(string)
		var c map[string]string
		if json.Unmarshal([]byte(content), &c) != nil {
			t.Errorf("messages: content %q is not a JSON string", b["content"])
		}
		b["receive_id_type"] = r.URL.Query().Get("receive_id_type")
		b["content"] = c
		f.messages = append(f.messages, b)
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]string{"message_id": "om_1"}})
	default:
		t.Errorf("unexpected path %s", r.URL.Path)
		writeJSON(w, 404, map[string]any{"code": 404, "msg": "not found"})
	}
}

func TestFeishu(t *testing.T) {
	ff := &feishuFake{t: t, uploads: map[string][]byte{}}
	srv := fake(t, ff.handler)
	clk := newClock()
	fs := NewFeishu(FeishuAccount{AppID: "cli_app", AppSecret: "app-secret-123", BaseURL: srv.URL + "/"}, testOptions(clk))
	ctx := context.Background()

	png := memFile(t, "chart.png", []byte("\x89PNG fake image"))
	pdf := memFile(t, "report.pdf", []byte("%PDF-1.7 fake"))
	out := fs.Send(ctx, &Message{Target: Target{ChatID: "oc_chat"}, Caption: "Weekly report", Files: []*File{png, pdf}})
	mustSend(t, out)
	if len(ff.messages) != 3 {
		t.Fatalf("messages: %v", ff.messages)
	}
	want := []string{`text map[text:Weekly report]`, `image map[image_key:img_0]`, `file map[file_key:file_pdf_report.pdf]`}
	for i, m := range ff.messages {
		if got := fmt.Sprint(m["msg_type"], " ", m["content"]); got != want[i] || m["receive_id"] != "oc_chat" || m["receive_id_type"] != "chat_id" {
			t.Errorf("message %d: %v, want %s to oc_chat", i, m, want[i])
		}
	}
	if string(ff.uploads["img_0"]) != "\x89PNG fake image" || string(ff.uploads["file_pdf_report.pdf"]) != "%PDF-1.7 fake" {
		t.Errorf("uploaded contents differ: %q", ff.uploads)
	}
	if ff.tokens != 1 {
		t.Errorf("tokens fetched: %d, want 1 (cached)", ff.tokens)
	}

	t.Run("open_id", func(t *testing.T) {
		mustSend(t, fs.Send(ctx, &Message{Target: Target{ChatID: "ou_user"}, Caption: "hi"}))
		if m := ff.messages[len(ff.messages)-1]; m["receive_id_type"] != "open_id" {
			t.Errorf("receive_id_type %v", m["receive_id_type"])
		}
	})
	t.Run("token refreshed after expiry", func(t *testing.T) {
		clk.Advance(2 * time.Hour)
		mustSend(t, fs.Send(ctx, &Message{Target: Target{ChatID: "oc_chat"}, Caption: "later"}))
		if ff.tokens != 2 {
			t.Errorf("tokens fetched: %d, want 2", ff.tokens)
		}
	})
	t.Run("token refused is fetched again", func(t *testing.T) {
		ff.mu.Lock()
		ff.valid = nil // revoked
		ff.mu.Unlock()
		mustSend(t, fs.Send(ctx, &Message{Target: Target{ChatID: "oc_chat"}, Caption: "again"}))
		if ff.tokens != 3 {
			t.Errorf("tokens fetched: %d, want 3", ff.tokens)
		}
	})
	t.Run("rate limit waits the hint", func(t *testing.T) {
		ff.mu.Lock()
		ff.limitNxt = 1
		ff.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, fs.Send(ctx, &Message{Target: Target{ChatID: "oc_chat"}, Files: []*File{pdf}}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{2 * time.Second}) {
			t.Errorf("waits %v, want [2s]", s)
		}
	})
	t.Run("rate limit beyond the deadline fails", func(t *testing.T) {
		ff.mu.Lock()
		ff.limitNxt = 1
		ff.mu.Unlock()
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		out := fs.Send(dctx, &Message{Target: Target{ChatID: "oc_chat"}, Files: []*File{pdf}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "rate limited") {
			t.Errorf("got %v, want a rate-limit failure", out.Files[0])
		}
	})
	t.Run("limits", func(t *testing.T) {
		big := &File{Name: "big.png", Ext: "png", Kind: Image, Size: 11 << 20}
		if r := fs.Check(big); !strings.Contains(r, "10 MB") {
			t.Errorf("11 MB image: %q", r)
		}
		if r := fs.Check(&File{Name: "e.txt", Ext: "txt", Size: 0}); r == "" {
			t.Error("empty file accepted")
		}
		if r := fs.Check(&File{Name: "f.zip", Ext: "zip", Size: 19 << 20}); r != "" {
			t.Errorf("19 MB zip: %q", r)
		}
	})
	t.Run("bad secret", func(t *testing.T) {
		bad := NewFeishu(FeishuAccount{AppID: "cli_app", AppSecret: "wrong", BaseURL: srv.URL}, testOptions(clk))
		out := bad.Send(ctx, &Message{Target: Target{ChatID: "oc_chat"}, Files: []*File{pdf}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "TOOLSVC_FEISHU_APP_SECRET") {
			t.Errorf("got %v", out.Files[0])
		}
	})
}
