package channels

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// telegramFake checks requests as the Bot API would: the token in the
// path, the method's file field, chat_id and caption as form fields, and a
// 429 carrying parameters.retry_after.
type telegramFake struct {
	t        *testing.T
	mu       sync.Mutex
	limitNxt int
	calls    []string
}

func (f *telegramFake) handler(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	method, ok := strings.CutPrefix(r.URL.Path, "/bot123456:tg-token/")
	if !ok {
		writeJSON(w, 401, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	if f.limitNxt > 0 {
		f.limitNxt--
		w.Header().Set("Retry-After", "30") // coarser than the body's hint
		writeJSON(w, 429, map[string]any{"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 7", "parameters": map[string]any{"retry_after": 7}})
		return
	}
	if method == "sendMessage" {
		var b map[string]any
		readJSON(f.t, r, &b)
		f.calls = append(f.calls, fmt.Sprintf("sendMessage %v %v", b["chat_id"], b["text"]))
		writeJSON(w, 200, map[string]any{"ok": true, "result": map[string]any{"message_id": 1}})
		return
	}
	fd := readForm(f.t, r)
	field := map[string]string{"sendPhoto": "photo", "sendDocument": "document", "sendVideo": "video", "sendAudio": "audio", "sendAnimation": "animation"}[method]
	if field == "" || fd.Files[field] == nil {
		f.t.Errorf("%s: files %v", method, fd.Filenames)
	}
	if fd.Values["chat_id"] == "bad" {
		writeJSON(w, 400, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: chat not found"})
		return
	}
	f.calls = append(f.calls, fmt.Sprintf("%s %s %s=%s caption=%q", method, fd.Values["chat_id"], fd.Filenames[field], fd.Files[field], fd.Values["caption"]))
	writeJSON(w, 200, map[string]any{"ok": true, "result": map[string]any{"message_id": 2}})
}

func TestTelegram(t *testing.T) {
	tf := &telegramFake{t: t}
	srv := fake(t, tf.handler)
	clk := newClock()
	tg := NewTelegram(TelegramAccount{Token: "123456:tg-token", BaseURL: srv.URL}, testOptions(clk))
	ctx := context.Background()
	png := memFile(t, "p.png", []byte("png"))
	doc := memFile(t, "d.docx", []byte("docx"))
	mp4 := memFile(t, "v.mp4", []byte("mp4"))

	mustSend(t, tg.Send(ctx, &Message{Target: Target{ChatID: "-1001"}, Caption: "see", Files: []*File{png, doc, mp4}}))
	want := []string{`sendPhoto -1001 p.png=png caption="see"`, `sendDocument -1001 d.docx=docx caption=""`, `sendVideo -1001 v.mp4=mp4 caption=""`}
	if !slices.Equal(tf.calls, want) {
		t.Errorf("calls:\n%s", strings.Join(tf.calls, "\n"))
	}
	t.Run("429 waits retry_after", func(t *testing.T) {
		tf.mu.Lock()
		tf.limitNxt = 1
		tf.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, tg.Send(ctx, &Message{Target: Target{ChatID: "-1001"}, Files: []*File{doc}}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{7 * time.Second}) {
			t.Errorf("waits %v, want [7s]", s)
		}
	})
	t.Run("failed first file sends the caption alone", func(t *testing.T) {
		out := tg.Send(ctx, &Message{Target: Target{ChatID: "bad"}, Caption: "c", Files: []*File{doc}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "chat not found") {
			t.Errorf("file: %v", out.Files[0])
		}
		if got := tf.calls[len(tf.calls)-1]; got != "sendMessage bad c" {
			t.Errorf("last call %s", got)
		}
	})
	t.Run("bad token never quoted", func(t *testing.T) {
		bad := NewTelegram(TelegramAccount{Token: "999:wrong-token", BaseURL: srv.URL}, testOptions(clk))
		out := bad.Send(ctx, &Message{Target: Target{ChatID: "1"}, Files: []*File{doc}})
		if out.Files[0] == nil || strings.Contains(out.Files[0].Error(), "wrong-token") || !strings.Contains(out.Files[0].Error(), "Unauthorized") {
			t.Errorf("got %v", out.Files[0])
		}
		down := NewTelegram(TelegramAccount{Token: "999:wrong-token", BaseURL: "http://127.0.0.1:1"}, testOptions(clk))
		out = down.Send(ctx, &Message{Target: Target{ChatID: "1"}, Files: []*File{doc}})
		if out.Files[0] == nil || strings.Contains(out.Files[0].Error(), "wrong-token") {
			t.Errorf("unreachable: %v", out.Files[0])
		}
	})
	t.Run("photo limit", func(t *testing.T) {
		if r := tg.Check(&File{Name: "x.jpg", Ext: "jpg", Kind: Image, Size: 11 << 20}); !strings.Contains(r, "10 MB") {
			t.Errorf("%q", r)
		}
		if r := tg.Check(&File{Name: "x.zip", Ext: "zip", Size: 19 << 20}); r != "" {
			t.Errorf("%q", r)
		}
	})
}
