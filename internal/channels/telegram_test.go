package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/image/webp"
)

// telegramFake answers as the Bot API documents
// (https://core.telegram.org/bots/api): the token in the path
// (/bot<token>/<method>); sendMessage as JSON with chat_id and text of 1 to
// 4096 characters; sendPhoto, sendDocument, sendVideo, sendAudio and
// sendAnimation as multipart with chat_id, the method's file field and a
// caption of at most 1024 characters; reply_parameters a JSON object with
// an integer message_id. It refuses what the API refuses: a photo over
// 10 MB, or whose width plus height exceeds 10000 or whose sides' ratio
// exceeds 20 (PHOTO_INVALID_DIMENSIONS, #sendphoto); an upload over 50 MB
// (#sending-files). A 429 carries parameters.retry_after.
type telegramFake struct {
	t        *testing.T
	mu       sync.Mutex
	limitNxt int
	calls    []string
}

func (f *telegramFake) refuse(w http.ResponseWriter, desc string) {
	writeJSON(w, 400, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: " + desc})
}

// replyOK checks reply_parameters as the API reads it.
func telegramReplyOK(v any) (string, bool) {
	if v == nil {
		return "", true
	}
	var rp struct {
		MessageID json.Number `json:"message_id"`
	}
	b, _ := json.Marshal(v)
	if s, ok := v.(string); ok {
		b = []byte(s)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&rp) != nil {
		return "", false
	}
	if _, err := rp.MessageID.Int64(); err != nil {
		return "", false
	}
	return rp.MessageID.String(), true
}

func (f *telegramFake) handler(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	checkUA(f.t, r)
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
		text, _ := b["text"].(string)
		reply, ok := telegramReplyOK(b["reply_parameters"])
		switch {
		case b["chat_id"] == nil || b["chat_id"] == "":
			f.refuse(w, "chat_id is empty")
		case text == "" || utf8.RuneCountInString(text) > 4096:
			f.refuse(w, "message text is empty or too long")
		case !ok:
			f.refuse(w, "can't parse reply parameters JSON object")
		default:
			f.calls = append(f.calls, fmt.Sprintf("sendMessage %v %v reply=%s", b["chat_id"], text, reply))
			writeJSON(w, 200, map[string]any{"ok": true, "result": map[string]any{"message_id": 1}})
		}
		return
	}
	fd := readForm(f.t, r)
	field := map[string]string{"sendPhoto": "photo", "sendDocument": "document", "sendVideo": "video", "sendAudio": "audio", "sendAnimation": "animation"}[method]
	data := fd.Files[field]
	reply, replyOK := telegramReplyOK(nilIfEmpty(fd.Values["reply_parameters"]))
	switch {
	case field == "" || data == nil:
		f.refuse(w, "there is no "+field+" in the request")
	case fd.Values["chat_id"] == "":
		f.refuse(w, "chat_id is empty")
	case fd.Values["chat_id"] == "bad":
		f.refuse(w, "chat not found")
	case utf8.RuneCountInString(fd.Values["caption"]) > 1024:
		f.refuse(w, "message caption is too long")
	case !replyOK:
		f.refuse(w, "can't parse reply parameters JSON object")
	case len(data) > 50_000_000:
		writeJSON(w, 413, map[string]any{"ok": false, "error_code": 413, "description": "Request Entity Too Large"})
	case method == "sendPhoto" && len(data) > 10_000_000:
		f.refuse(w, "PHOTO_INVALID_DIMENSIONS")
	case method == "sendPhoto" && !telegramPhotoOK(data):
		f.refuse(w, "PHOTO_INVALID_DIMENSIONS")
	default:
		f.calls = append(f.calls, fmt.Sprintf("%s %s %s(%d bytes) caption=%q reply=%s", method, fd.Values["chat_id"], fd.Filenames[field], len(data), fd.Values["caption"], reply))
		writeJSON(w, 200, map[string]any{"ok": true, "result": map[string]any{"message_id": 2}})
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// telegramPhotoOK applies sendPhoto's dimension rule to an image's bytes.
func telegramPhotoOK(data []byte) bool {
	var c image.Config
	var err error
	for _, dec := range []func(r *bytes.Reader) (image.Config, error){
		func(r *bytes.Reader) (image.Config, error) { return png.DecodeConfig(r) },
		func(r *bytes.Reader) (image.Config, error) { return jpeg.DecodeConfig(r) },
		func(r *bytes.Reader) (image.Config, error) { return webp.DecodeConfig(r) },
	} {
		if c, err = dec(bytes.NewReader(data)); err == nil {
			break
		}
	}
	if err != nil {
		return false
	}
	w, h := c.Width, c.Height
	return w+h <= 10000 && max(w, h) <= 20*min(w, h)
}

func TestTelegram(t *testing.T) {
	tf := &telegramFake{t: t}
	srv := fake(t, tf.handler)
	clk := newClock()
	tg := NewTelegram(TelegramAccount{Token: "123456:tg-token", BaseURL: srv.URL}, testOptions(clk))
	ctx := context.Background()
	png := memFile(t, "p.png", pngData(t, 200, 100))
	long := memFile(t, "page.png", pngData(t, 300, 12000))
	wide := memFile(t, "strip.png", pngData(t, 2100, 100))
	doc := memFile(t, "d.docx", []byte("docx"))
	mp4 := memFile(t, "v.mp4", []byte("mp4"))

	mustSend(t, tg.Send(ctx, &Message{Target: Target{ChatID: "-1001"}, Caption: "see", Files: []*File{png, long, wide, doc, mp4}}))
	want := []string{
		fmt.Sprintf(`sendPhoto -1001 p.png(%d bytes) caption="see" reply=`, png.Size),
		fmt.Sprintf(`sendDocument -1001 page.png(%d bytes) caption="" reply=`, long.Size),
		fmt.Sprintf(`sendDocument -1001 strip.png(%d bytes) caption="" reply=`, wide.Size),
		`sendDocument -1001 d.docx(4 bytes) caption="" reply=`,
		`sendVideo -1001 v.mp4(3 bytes) caption="" reply=`,
	}
	if !slices.Equal(tf.calls, want) {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(tf.calls, "\n"), strings.Join(want, "\n"))
	}
	t.Run("the fake refuses what sendPhoto refuses", func(t *testing.T) {
		// The sender's check and the fake's agree: were the sender to
		// send the long page as a photo, it would fail.
		if telegramPhotoOK(pngData(t, 300, 12000)) || telegramPhotoOK(pngData(t, 2100, 100)) || !telegramPhotoOK(pngData(t, 2000, 100)) {
			t.Error("fake's dimension rule is wrong")
		}
	})
	t.Run("replies", func(t *testing.T) {
		tf.calls = nil
		mustSend(t, tg.Send(ctx, &Message{Target: Target{ChatID: "-1001"}, Caption: strings.Repeat("x", 1100), Files: []*File{doc}, ReplyTo: "42"}))
		if len(tf.calls) != 2 || !strings.HasSuffix(tf.calls[0], "reply=42") || !strings.HasSuffix(tf.calls[1], "reply=42") {
			t.Errorf("calls:\n%s", strings.Join(tf.calls, "\n"))
		}
		// Not a Telegram message ID: sent without threading.
		mustSend(t, tg.Send(ctx, &Message{Target: Target{ChatID: "-1001"}, Files: []*File{doc}, ReplyTo: "om_abc"}))
		if got := tf.calls[len(tf.calls)-1]; !strings.HasSuffix(got, "reply=") {
			t.Errorf("got %s", got)
		}
	})
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
		if got := tf.calls[len(tf.calls)-1]; got != "sendMessage bad c reply=" {
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
	t.Run("limits", func(t *testing.T) {
		// A photo over 10 MB (decimal) goes as a document, not refused.
		big := &File{Name: "x.jpg", Ext: "jpg", Kind: Image, Size: 10_000_001, Content: bytes.NewReader(nil)}
		if m, _ := telegramMethod(big); m != "sendDocument" || tg.Check(big) != "" {
			t.Errorf("10 MB + 1 photo: %s %q", m, tg.Check(big))
		}
		if r := tg.Check(&File{Name: "x.zip", Ext: "zip", Size: 50_000_001}); !strings.Contains(r, "50 MB") {
			t.Errorf("%q", r)
		}
	})
}
