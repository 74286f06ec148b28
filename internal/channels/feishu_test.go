package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	_ "image/png" // the fake reads PNG headers as Feishu does
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// feishuFake answers as the Open Platform documents: the tenant token
// exchange; the Bearer token on every call; im/v1/images with image_type
// and image, not empty (234010), at most 10 MB (234006), a GIF at most
// 2000x2000 and another image at most 12000x12000 pixels
// (https://open.feishu.cn/document/server-docs/im-v1/image/create);
// im/v1/files with file_type (opus, mp4, pdf, doc, xls, ppt, stream),
// file_name and file, not empty, at most 30 MB
// (https://open.feishu.cn/document/server-docs/im-v1/file/create);
// im/v1/messages with receive_id_type, receive_id, msg_type and content
// that is itself a JSON string
// (https://open.feishu.cn/document/server-docs/im-v1/message/create); and
// the reply, im/v1/messages/{message_id}/reply with msg_type and content
// (https://open.feishu.cn/document/server-docs/im-v1/message/reply).
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
	checkUA(t, r)
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
	if id, ok := strings.CutPrefix(r.URL.Path, "/open-apis/im/v1/messages/"); ok {
		f.reply(w, r, strings.TrimSuffix(id, "/reply"))
		return
	}
	switch r.URL.Path {
	case "/open-apis/im/v1/images":
		fd := readForm(t, r)
		if fd.Values["image_type"] != "message" {
			t.Errorf("images: fields %v, files %v", fd.Values, fd.Filenames)
		}
		if code, msg := feishuImageOK(fd.Files["image"]); code != 0 {
			writeJSON(w, 400, map[string]any{"code": code, "msg": msg})
			return
		}
		key := fmt.Sprintf("img_%d", len(f.uploads))
		f.uploads[key] = fd.Files["image"]
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]string{"image_key": key}})
	case "/open-apis/im/v1/files":
		fd := readForm(t, r)
		if !slices.Contains([]string{"opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"}, fd.Values["file_type"]) || fd.Values["file_name"] == "" {
			t.Errorf("files: fields %v, files %v", fd.Values, fd.Filenames)
		}
		if n := len(fd.Files["file"]); n == 0 || n > 30<<20 {
			writeJSON(w, 400, map[string]any{"code": 234010, "msg": "File's size can't be 0, or exceeds 30 MB."})
			return
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

// reply answers im/v1/messages/{message_id}/reply, recording the message
// with the ID it answers.
func (f *feishuFake) reply(w http.ResponseWriter, r *http.Request, id string) {
	var b map[string]any
	readJSON(f.t, r, &b)
	content, _ := b["content"].(string)
	var c map[string]string
	if !strings.HasPrefix(id, "om_") || json.Unmarshal([]byte(content), &c) != nil || b["receive_id"] != nil {
		writeJSON(w, 400, map[string]any{"code": 230001, "msg": "invalid message_id or content"})
		return
	}
	b["content"] = c
	b["reply_to"] = id
	f.messages = append(f.messages, b)
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]string{"message_id": "om_2"}})
}

// feishuImageOK applies the image upload's limits to its bytes.
func feishuImageOK(data []byte) (int, string) {
	switch {
	case len(data) == 0:
		return 234010, "File's size can't be 0."
	case len(data) > 10<<20:
		return 234006, "The file size exceed the max value."
	}
	c, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 234011, "Can't recognize image format."
	}
	side := 12000
	if format == "gif" {
		side = 2000
	}
	if c.Width > side || c.Height > side {
		return 234007, "Image resolution exceeds the limit."
	}
	return 0, ""
}

func TestFeishu(t *testing.T) {
	ff := &feishuFake{t: t, uploads: map[string][]byte{}}
	srv := fake(t, ff.handler)
	clk := newClock()
	fs := NewFeishu(FeishuAccount{AppID: "cli_app", AppSecret: "app-secret-123", BaseURL: srv.URL + "/"}, testOptions(clk))
	ctx := context.Background()

	pngBytes := pngData(t, 64, 48)
	png := memFile(t, "chart.png", pngBytes)
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
	if !bytes.Equal(ff.uploads["img_0"], pngBytes) || string(ff.uploads["file_pdf_report.pdf"]) != "%PDF-1.7 fake" {
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
	t.Run("replies", func(t *testing.T) {
		n := len(ff.messages)
		mustSend(t, fs.Send(ctx, &Message{Target: Target{ChatID: "oc_chat"}, Caption: "here", Files: []*File{png}, ReplyTo: "om_user_msg"}))
		for _, m := range ff.messages[n:] {
			if m["reply_to"] != "om_user_msg" {
				t.Errorf("not a reply: %v", m)
			}
		}
		if len(ff.messages)-n != 2 {
			t.Errorf("%d messages, want 2", len(ff.messages)-n)
		}
	})
	t.Run("images over the resolution limits are refused before upload", func(t *testing.T) {
		tall := memFile(t, "tall.png", pngData(t, 100, 12001))
		if r := fs.Check(tall); !strings.Contains(r, "100x12001") || !strings.Contains(r, "12000x12000") || !strings.Contains(r, "Next:") {
			t.Errorf("tall png: %q", r)
		}
		// The fake refuses it too: the check spares an upload that fails.
		if code, _ := feishuImageOK(pngData(t, 100, 12001)); code == 0 {
			t.Error("the fake took a 100x12001 png")
		}
		var gifBuf bytes.Buffer
		_ = gif.Encode(&gifBuf, image.NewPaletted(image.Rect(0, 0, 2001, 10), color.Palette{color.Black}), nil)
		if r := fs.Check(memFile(t, "wide.gif", gifBuf.Bytes())); !strings.Contains(r, "2000x2000") {
			t.Errorf("wide gif: %q", r)
		}
		if r := fs.Check(memFile(t, "fake.png", []byte("not a png"))); !strings.Contains(r, "cannot be read") {
			t.Errorf("broken png: %q", r)
		}
		if r := fs.Check(memFile(t, "ok.png", pngData(t, 12000, 10))); r != "" {
			t.Errorf("12000x10 png: %q", r)
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
