package channels

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	_ "image/jpeg" // uploads are described by their dimensions
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the requests the senders make")

// wire records each request a sender makes, in a stable text form: the
// method and path, the headers that matter, and the body (JSON indented,
// a multipart body as its list of parts, a file as its size and hash).
// Volatile values (multipart boundaries, signatures) and secrets are
// replaced, so a golden file changes only when the wire does.
type wire struct {
	mu      sync.Mutex
	secrets []string // replaced by <secret>
	out     strings.Builder
}

func (w *wire) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		w.mu.Lock()
		w.out.WriteString(w.describe(r, body))
		w.mu.Unlock()
		h(rw, r)
	}
}

func (w *wire) hide(s string) string {
	for _, sec := range w.secrets {
		s = strings.ReplaceAll(s, sec, "<secret>")
	}
	return s
}

func (w *wire) describe(r *http.Request, body []byte) string {
	var b strings.Builder
	target := r.URL.Path
	if q := r.URL.Query(); len(q) > 0 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range q {
				if !yield(k) {
					return
				}
			}
		})
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+"="+q.Get(k))
		}
		target += "?" + strings.Join(parts, "&")
	}
	fmt.Fprintf(&b, "%s %s\n", r.Method, w.hide(target))
	for _, h := range []string{"User-Agent", "Content-Type", "Authorization", "X-Acs-Dingtalk-Access-Token", "X-Toolsvc-Timestamp", "X-Toolsvc-Signature"} {
		v := r.Header.Get(h)
		if v == "" {
			continue
		}
		if mt, params, err := mime.ParseMediaType(v); err == nil && params["boundary"] != "" {
			v = mt + "; boundary=<boundary>"
		}
		if h == "X-Toolsvc-Signature" {
			v = "sha256=<hmac of the timestamp and body>"
		}
		fmt.Fprintf(&b, "%s: %s\n", h, w.hide(v))
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case len(body) == 0:
	case mt == "application/json":
		b.WriteString(w.hide(jsonText(body)) + "\n")
	case mt == "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			data, _ := io.ReadAll(p)
			if p.FileName() != "" {
				fmt.Fprintf(&b, "part %s: %s\n", p.Header.Get("Content-Disposition"), fileText(p.Header.Get("Content-Type"), data))
			} else {
				fmt.Fprintf(&b, "part %s = %s\n", p.FormName(), w.hide(shorten(string(data))))
			}
		}
	case mt == "application/x-www-form-urlencoded":
		v, _ := url.ParseQuery(string(body))
		fmt.Fprintf(&b, "form %s\n", v.Encode())
	default:
		fmt.Fprintf(&b, "body: %s\n", fileText(mt, body))
	}
	b.WriteString("\n")
	return b.String()
}

// fileText describes an uploaded file: an image by its dimensions (its
// encoded bytes depend on the Go release that wrote it), another file by
// its size and hash.
func fileText(ct string, data []byte) string {
	if c, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
		return fmt.Sprintf("%s, %dx%d pixels", ct, c.Width, c.Height)
	}
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%s, %d bytes, sha256 %s", ct, len(data), hex.EncodeToString(sum[:4]))
}

// shorten keeps a value to 200 bytes, saying how long it was: the
// golden file shows each WeCom text part's size in bytes.
func shorten(s string) string {
	if len(s) <= 200 {
		return s
	}
	cut := 24
	for !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("«%d bytes» %s…", len(s), s[:cut])
}

// jsonText indents a JSON body with its long strings shortened.
func jsonText(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return "not JSON: " + shorten(string(body))
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return shorten(x)
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	out, _ := json.MarshalIndent(walk(v), "", "  ")
	return string(out)
}

// assertWire fails t unless the recorded requests hold each of wants.
func assertWire(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("the requests lack %q", w)
		}
	}
}

// golden compares got with testdata/name.golden, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update ./internal/channels/ to write it)", err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the requests made, first at line %d:\n got: %s\nwant: %s\n(if the change is meant, run with -update and review the diff)", path, i+1, g, w)
			}
		}
	}
}

// TestGolden records each sender's exact requests for one message against
// its documented fake, and compares them with testdata/<channel>.golden.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	chinese := strings.Repeat("季度数据报告", 500) // 3000 characters, 9000 bytes
	t.Run("telegram", func(t *testing.T) {
		w := &wire{secrets: []string{"123456:tg-token"}}
		tf := &telegramFake{t: t}
		srv := fake(t, w.wrap(tf.handler))
		tg := NewTelegram(TelegramAccount{Token: "123456:tg-token", BaseURL: srv.URL}, testOptions(newClock()))
		mustSend(t, tg.Send(ctx, &Message{Target: Target{ChatID: "-1001"}, Caption: "Q3 numbers", ReplyTo: "42", Files: []*File{
			memFile(t, "chart.png", pngData(t, 200, 100)), memFile(t, "page.png", pngData(t, 300, 12000)), memFile(t, "report.pdf", []byte("%PDF-1.7 report")),
		}}))
		// Whatever the golden file says: the long page went as a document.
		assertWire(t, w.out.String(), "POST /bot<secret>/sendDocument\n", `filename="page.png"`, `"message_id":42`)
		golden(t, "telegram", w.out.String())
	})
	t.Run("wecom robot", func(t *testing.T) {
		clk := newClock()
		w := &wire{secrets: []string{"robot-key-123"}}
		wf := &wecomFake{t: t, now: clk.Now, uploads: map[string]string{}}
		srv := fake(t, w.wrap(wf.handler))
		wc := NewWeCom(WeComAccount{WebhookURL: srv.URL + "/cgi-bin/webhook/send?key=robot-key-123"}, testOptions(clk))
		mustSend(t, wc.Send(ctx, &Message{Caption: chinese, Files: []*File{
			memFile(t, "chart.png", []byte("png-image")), memFile(t, "report.pdf", []byte("%PDF-1.7 report")),
		}}))
		assertWire(t, w.out.String(), "«2046 bytes» 季度", "«816 bytes»")
		golden(t, "wecom-robot", w.out.String())
	})
	t.Run("wecom app", func(t *testing.T) {
		clk := newClock()
		w := &wire{secrets: []string{"wecom-secret-123", "wc-tok-1"}}
		wf := &wecomFake{t: t, now: clk.Now, uploads: map[string]string{}}
		srv := fake(t, w.wrap(wf.handler))
		wc := NewWeCom(WeComAccount{CorpID: "ww-corp", Secret: "wecom-secret-123", AgentID: 1000002, BaseURL: srv.URL}, testOptions(clk))
		mustSend(t, wc.Send(ctx, &Message{Target: Target{ChatID: "zhangsan"}, Caption: "Q3", Files: []*File{memFile(t, "clip.mp4", mp4Data(3))}}))
		golden(t, "wecom-app", w.out.String())
	})
	t.Run("dingtalk", func(t *testing.T) {
		w := &wire{secrets: []string{"ding-secret-123", "ding-tok-1"}}
		df := &dingtalkFake{t: t, uploads: map[string]string{}}
		srv := fake(t, w.wrap(df.handler))
		dt := NewDingTalk(DingTalkAccount{ClientID: "ding-app", ClientSecret: "ding-secret-123", APIURL: srv.URL, OAPIURL: srv.URL}, testOptions(newClock()))
		mustSend(t, dt.Send(ctx, &Message{Target: Target{ChatID: "cidGROUP=="}, Caption: "Q3", ReplyTo: "msg-ignored", Files: []*File{
			memFile(t, "chart.jpg", []byte("jpg-data")), memFile(t, "sheet.xlsx", []byte("xlsx-data")), memFile(t, "clip.mp4", mp4Data(61)),
		}}))
		golden(t, "dingtalk", w.out.String())
	})
	t.Run("discord", func(t *testing.T) {
		w := &wire{secrets: []string{"discord-bot-token", "hook-token"}}
		df := &discordFake{t: t}
		srv := fake(t, w.wrap(df.handler))
		bot := NewDiscord(DiscordAccount{Token: "discord-bot-token", BaseURL: srv.URL + "/api/v10"}, testOptions(newClock()))
		mustSend(t, bot.Send(ctx, &Message{Target: Target{ChatID: "1234"}, Caption: "Q3", ReplyTo: "1198765432109876543", Files: []*File{
			memFile(t, "chart.png", pngData(t, 20, 10)), memFile(t, "notes.txt", []byte("notes")),
		}}))
		hook := NewDiscord(DiscordAccount{WebhookURL: srv.URL + "/api/webhooks/42/hook-token"}, testOptions(newClock()))
		mustSend(t, hook.Send(ctx, &Message{Caption: "only text"}))
		assertWire(t, w.out.String(), "User-Agent: DiscordBot (https://github.com/countbot/toolsvc, v1.2.3)\n")
		golden(t, "discord", w.out.String())
	})
	t.Run("slack", func(t *testing.T) {
		w := &wire{secrets: []string{"xoxb-slack-token"}}
		sf := &slackFake{t: t, uploaded: map[string]string{}}
		apiSrv := fake(t, w.wrap(sf.api))
		filesSrv := fake(t, w.wrap(sf.files))
		sf.upload = filesSrv.URL
		sl := NewSlack(SlackAccount{Token: "xoxb-slack-token", BaseURL: apiSrv.URL + "/api"}, testOptions(newClock()))
		mustSend(t, sl.Send(ctx, &Message{Target: Target{ChatID: "C1"}, Caption: "Q3", ReplyTo: "1712345678.000100", Files: []*File{memFile(t, "d.csv", []byte("a,b"))}}))
		golden(t, "slack", w.out.String())
	})
	t.Run("feishu", func(t *testing.T) {
		w := &wire{secrets: []string{"app-secret-123", "t-1"}}
		ff := &feishuFake{t: t, uploads: map[string][]byte{}}
		srv := fake(t, w.wrap(ff.handler))
		fs := NewFeishu(FeishuAccount{AppID: "cli_app", AppSecret: "app-secret-123", BaseURL: srv.URL}, testOptions(newClock()))
		mustSend(t, fs.Send(ctx, &Message{Target: Target{ChatID: "oc_chat"}, Caption: "Q3", ReplyTo: "om_user_msg", Files: []*File{
			memFile(t, "chart.png", pngData(t, 20, 10)), memFile(t, "report.pdf", []byte("%PDF-1.7 report")),
		}}))
		mustSend(t, fs.Send(ctx, &Message{Target: Target{ChatID: "ou_user"}, Caption: "not a reply"}))
		golden(t, "feishu", w.out.String())
	})
	t.Run("webhook", func(t *testing.T) {
		w := &wire{secrets: []string{"hook-secret-123"}}
		h := &webhookReceiver{t: t, secret: "hook-secret-123"}
		srv := fake(t, w.wrap(h.handler))
		wh := NewWebhook(WebhookAccount{URL: srv.URL + "/hook", Secret: "hook-secret-123"}, testOptions(newClock()))
		mustSend(t, wh.Send(ctx, &Message{Session: "webhook:default:room-1:1700000000", Target: Target{Channel: "webhook", Account: "default", ChatID: "room-1"},
			Caption: "Q3", ReplyTo: "msg-7", Files: []*File{memFile(t, "a.csv", []byte("x,y\n1,2\n"))}}))
		golden(t, "webhook", w.out.String())
	})
}
