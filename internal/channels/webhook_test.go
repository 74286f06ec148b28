package channels

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// webhookReceiver is what an operator would run, written from
// docs/channels.md ("The generic webhook"): it checks the User-Agent and
// the signature over the raw body, then reads the payload and the files.
type webhookReceiver struct {
	t        *testing.T
	secret   string
	mu       sync.Mutex
	limitNxt int
	fail     bool
	got      []WebhookPayload
	files    [][]string // names and contents
}

func (h *webhookReceiver) handler(w http.ResponseWriter, r *http.Request) {
	t := h.t
	h.mu.Lock()
	defer h.mu.Unlock()
	checkUA(t, r)
	if h.limitNxt > 0 {
		h.limitNxt--
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if h.fail {
		http.Error(w, "receiver down", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// A body cut short of its Content-Length: the sender broke off.
		http.Error(w, "incomplete body", http.StatusBadRequest)
		return
	}
	if r.ContentLength != int64(len(body)) {
		t.Errorf("Content-Length %d, body %d", r.ContentLength, len(body))
	}
	if h.secret != "" {
		ts := r.Header.Get("X-Toolsvc-Timestamp")
		mac := hmac.New(sha256.New, []byte(h.secret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Toolsvc-Signature"))) || ts == "" {
			t.Errorf("signature %q, want %q", r.Header.Get("X-Toolsvc-Signature"), want)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
	}
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var p WebhookPayload
	var files []string
	for {
		part, err := mr.NextPart()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(part)
		switch part.FormName() {
		case "payload":
			if err := json.Unmarshal(data, &p); err != nil {
				t.Errorf("payload: %v", err)
			}
		case "files":
			files = append(files, part.FileName()+"="+string(data))
		default:
			t.Errorf("unexpected field %q", part.FormName())
		}
	}
	h.got = append(h.got, p)
	h.files = append(h.files, files)
	w.WriteHeader(204)
}

func TestWebhook(t *testing.T) {
	h := &webhookReceiver{t: t, secret: "hook-secret-123"}
	srv := fake(t, h.handler)
	clk := newClock()
	wh := NewWebhook(WebhookAccount{URL: srv.URL + "/hook", Secret: "hook-secret-123"}, testOptions(clk))
	ctx := context.Background()
	a := memFile(t, "a.csv", []byte("x,y\n1,2\n"))
	b := memFile(t, "b.md", []byte("# title\n"))
	m := &Message{Session: "webhook:default:room-1:1700000000", Target: Target{Channel: "webhook", Account: "default", ChatID: "room-1"}, Caption: "data", Files: []*File{a, b}, ReplyTo: "msg-7"}
	mustSend(t, wh.Send(ctx, m))
	if len(h.got) != 1 {
		t.Fatalf("requests %d", len(h.got))
	}
	p := h.got[0]
	if p.Session != m.Session || p.ChatID != "room-1" || p.Caption != "data" || p.ReplyTo != "msg-7" || len(p.Files) != 2 || p.Files[0].Name != "a.csv" || p.Files[1].Size != 8 {
		t.Errorf("payload %+v", p)
	}
	if !slices.Equal(h.files[0], []string{"a.csv=x,y\n1,2\n", "b.md=# title\n"}) {
		t.Errorf("files %q", h.files[0])
	}
	t.Run("429 then success", func(t *testing.T) {
		h.mu.Lock()
		h.limitNxt = 1
		h.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, wh.Send(ctx, m))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{5 * time.Second}) {
			t.Errorf("waits %v", s)
		}
		// The retried request streamed the files again, whole.
		if got := h.files[len(h.files)-1]; !slices.Equal(got, h.files[0]) {
			t.Errorf("retried files %q", got)
		}
	})
	t.Run("failure reported for every file", func(t *testing.T) {
		h.mu.Lock()
		h.fail = true
		h.mu.Unlock()
		defer func() { h.mu.Lock(); h.fail = false; h.mu.Unlock() }()
		out := wh.Send(ctx, m)
		for i, err := range out.Files {
			if err == nil || !strings.Contains(err.Error(), "503") {
				t.Errorf("file %d: %v", i, err)
			}
		}
	})
}

// TestRedirectNotFollowed tries to lead a token to another host: the API
// answers with a redirect; the client must not go there.
func TestRedirectNotFollowed(t *testing.T) {
	var stolen atomic.Int32
	thief := fake(t, func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		w.WriteHeader(200)
	})
	api := fake(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	})
	clk := newClock()
	// A client that would follow redirects, as http.DefaultClient does.
	o := Options{Client: &http.Client{}, Now: clk.Now, Sleep: clk.Sleep}
	ctx := context.Background()
	f := memFile(t, "a.txt", []byte("hello"))
	for name, s := range map[string]Sender{
		"webhook":  NewWebhook(WebhookAccount{URL: api.URL + "/hook?key=hook-token"}, o),
		"telegram": NewTelegram(TelegramAccount{Token: "123:bot-token", BaseURL: api.URL}, o),
		"wecom":    NewWeCom(WeComAccount{WebhookURL: api.URL + "/cgi-bin/webhook/send?key=robot-key"}, o),
	} {
		out := s.Send(ctx, &Message{Target: Target{ChatID: "1"}, Files: []*File{f}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "redirect") {
			t.Errorf("%s: got %v, want a refused redirect", name, out.Files[0])
		}
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("the other host was reached %d times", n)
	}
}

func TestParseTarget(t *testing.T) {
	accounts := func(ch string) []string {
		if ch == "feishu" {
			return []string{"default", "ops"}
		}
		return nil
	}
	for _, c := range []struct {
		session, channel, chat string
		want                   Target
		err                    string
	}{
		{session: "feishu:ops:oc_123:1712345678", want: Target{"feishu", "ops", "oc_123"}},
		{session: "feishu:ops:oc_123", want: Target{"feishu", "ops", "oc_123"}},
		{session: "feishu:oc_123", want: Target{"feishu", "", "oc_123"}},
		{session: "telegram:-1001234:1712345678", want: Target{"telegram", "", "-1001234"}},
		{session: "telegram:main:-1001234:1712345678.5", want: Target{"telegram", "main", "-1001234"}},
		{session: "qq:default:group:ABC:1712345678", want: Target{"qq", "default", "group:ABC"}},
		{session: "Lark:default:oc_9:1712345678", want: Target{"feishu", "default", "oc_9"}},
		{session: "web:abc123", err: "no chat channel"},
		{session: "session-42", err: "no chat channel"},
		{session: "", err: "no chat channel"},
		{session: "feishu:", err: "no chat"},
		{session: "web:1", channel: "dingtalk", chat: "cid1", want: Target{"dingtalk", "", "cid1"}},
		{channel: "feishu:ops", chat: "oc_1", want: Target{"feishu", "ops", "oc_1"}},
		{channel: "irc", chat: "#x", err: "not one of"},
		{chat: "oc_1", err: "needs X-Channel"},
	} {
		got, err := ParseTarget(c.session, c.channel, c.chat, accounts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q %q %q: err %v, want %q", c.session, c.channel, c.chat, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q %q %q: %+v %v, want %+v", c.session, c.channel, c.chat, got, err, c.want)
		}
	}
}

func TestManagerAccounts(t *testing.T) {
	m := NewManager()
	if !m.Empty() {
		t.Fatal("new manager not empty")
	}
	one := NewWebhook(WebhookAccount{URL: "http://127.0.0.1:1/a"}, Options{})
	two := NewWebhook(WebhookAccount{URL: "http://127.0.0.1:1/b"}, Options{})
	m.Add("webhook", "team", one)
	if s, tg, err := m.Sender(Target{Channel: "webhook"}); err != nil || s != Sender(one) || tg.Account != "team" {
		t.Errorf("only account: %v %v %v", s, tg, err)
	}
	m.Add("webhook", "", two)
	if s, _, err := m.Sender(Target{Channel: "webhook"}); err != nil || s != Sender(two) {
		t.Errorf("default account: %v %v", s, err)
	}
	if _, _, err := m.Sender(Target{Channel: "webhook", Account: "nope"}); err == nil || !strings.Contains(err.Error(), "default, team") {
		t.Errorf("unknown account: %v", err)
	}
	if _, _, err := m.Sender(Target{Channel: "slack"}); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("unconfigured channel: %v", err)
	}
}

// TestFileChangedWhileSent: a file that shrinks after it was measured
// fails rather than going out cut; one that grows goes out as measured.
func TestFileChangedWhileSent(t *testing.T) {
	h := &webhookReceiver{t: t}
	srv := fake(t, h.handler)
	wh := NewWebhook(WebhookAccount{URL: srv.URL}, testOptions(newClock()))
	shrunk := &File{Name: "a.txt", Ext: "txt", Size: 100, Content: bytes.NewReader([]byte("only 14 bytes."))}
	if out := wh.Send(context.Background(), &Message{Files: []*File{shrunk}}); out.Files[0] == nil {
		t.Error("a shrunk file was reported as sent")
	}
	grown := &File{Name: "b.txt", Ext: "txt", Size: 4, Content: bytes.NewReader([]byte("measured, then grew"))}
	mustSend(t, wh.Send(context.Background(), &Message{Files: []*File{grown}}))
	if got := h.files[len(h.files)-1]; !slices.Equal(got, []string{"b.txt=meas"}) {
		t.Errorf("grown file sent as %q", got)
	}
}
