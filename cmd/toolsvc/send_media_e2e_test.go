package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countbot/toolsvc/internal/channels"
)

// TestSendMediaToolsAbsentWithoutChannel: with no chat channel configured,
// send_media is not offered.
func TestSendMediaToolsAbsentWithoutChannel(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	if names := s.toolNames(t); slices.Contains(names, "send_media") {
		t.Errorf("send_media offered without a channel: %v", names)
	}
	if resp, _ := s.do(t, "GET", "/tools/send_media", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /tools/send_media: %d, want 404", resp.StatusCode)
	}
}

// mediaReceiver is an operator's webhook receiver: it checks the signature
// and keeps each request's payload and files.
type mediaReceiver struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	fail   string // when set, every request gets a 502 with this body
	got    []channels.WebhookPayload
	files  []map[string]string
}

func (m *mediaReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != "" {
		http.Error(w, m.fail, http.StatusBadGateway)
		return
	}
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, []byte(m.secret))
	mac.Write([]byte(r.Header.Get("X-Toolsvc-Timestamp") + "."))
	mac.Write(body)
	if got, want := r.Header.Get("X-Toolsvc-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		m.t.Errorf("signature %q, want %q", got, want)
	}
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var p channels.WebhookPayload
	files := map[string]string{}
	for {
		part, err := mr.NextPart()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(part)
		if part.FormName() == "payload" {
			_ = json.Unmarshal(data, &p)
		} else {
			files[part.FileName()] = string(data)
		}
	}
	m.got = append(m.got, p)
	m.files = append(m.files, files)
	w.WriteHeader(http.StatusNoContent)
}

// TestSendMediaWebhook sends through the service to a webhook receiver on
// loopback, then makes the receiver fail with an answer that quotes the
// webhook's secret URL, which must not reach the result, the log or the
// audit log.
func TestSendMediaWebhook(t *testing.T) {
	t.Parallel()
	const hookToken = "hook-token-0123456789abcdef"
	const hookSecret = "hook-hmac-secret-0123456789"
	rcv := &mediaReceiver{t: t, secret: hookSecret}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	hookURL := srv.URL + "/in/" + hookToken
	s := startServer(t, map[string]string{"WEBHOOK_URL": hookURL, "WEBHOOK_SECRET": hookSecret})
	if names := s.toolNames(t); !slices.Contains(names, "send_media") {
		t.Fatalf("send_media not offered with a webhook configured: %v", names)
	}
	s.writeWS(t, "out/report.csv", "a,b\n1,2\n")
	s.writeWS(t, "out/run.exe", "MZ")

	res := s.invoke(t, "send_media", map[string]any{"file_paths": []string{"out/report.csv", "out/run.exe", "../escape.csv"}, "message": "Numbers"},
		"X-Session-ID", "webhook:default:room-9:1712345678", "X-Reply-To", "msg-5")
	out := mustSucceed(t, res)
	assertContains(t, "result", out, "Sent 1 of 3 files to webhook (account default, chat room-9)", "- out/report.csv: sent",
		"- out/run.exe: refused: its type", "- ../escape.csv: refused: path '../escape.csv' is outside the workspace")
	rcv.mu.Lock()
	if len(rcv.got) != 1 || rcv.got[0].Caption != "Numbers" || rcv.got[0].ChatID != "room-9" || rcv.got[0].ReplyTo != "msg-5" || rcv.files[0]["report.csv"] != "a,b\n1,2\n" {
		t.Errorf("receiver got %+v %q", rcv.got, rcv.files)
	}
	rcv.mu.Unlock()

	// X-Channel and X-Chat-ID name the chat outright.
	mustSucceed(t, s.invoke(t, "send_media", map[string]any{"file_paths": []string{"out/report.csv"}}, "X-Session-ID", "web:1", "X-Channel", "webhook", "X-Chat-ID", "room-1"))
	rcv.mu.Lock()
	if len(rcv.got) != 2 || rcv.got[1].ChatID != "room-1" || rcv.got[1].Session != "web:1" {
		t.Errorf("receiver got %+v", rcv.got)
	}
	rcv.fail = "upstream rejected " + hookURL + " token " + hookToken + " key " + hookSecret
	rcv.mu.Unlock()

	bad := s.invoke(t, "send_media", map[string]any{"file_paths": []string{"out/report.csv"}}, "X-Channel", "webhook", "X-Chat-ID", "room-1")
	mustFail(t, bad, "tool_error", "Nothing was sent", "- out/report.csv: failed: webhook refused it (HTTP 502): upstream rejected [REDACTED] token [REDACTED] key [REDACTED]")

	none := s.invoke(t, "send_media", map[string]any{"file_paths": []string{"out/report.csv"}, "message": "for the web UI"}, "X-Session-ID", "web:abc")
	assertContains(t, "no-channel result", mustSucceed(t, none), "Nothing was sent", "for the web UI")

	s.Stop(t)
	// The failure is logged for the operator, the secrets cut from it.
	assertContains(t, "logs", s.Logs(), "send_media: a file was not delivered", "upstream rejected [REDACTED] token [REDACTED]")
	for what, text := range map[string]string{"result": bad.Result, "logs": s.Logs(), "audit": readAuditText(s)} {
		for _, secret := range []string{hookToken, hookSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a secret %q", what, secret)
			}
		}
	}
}

// TestSendMediaTelegramThreadsAndFallsBack sends through the service to a
// Telegram Bot API stand-in: a long full-page screenshot (300x12000, which
// sendPhoto refuses as PHOTO_INVALID_DIMENSIONS,
// https://core.telegram.org/bots/api#sendphoto) goes by sendDocument, a
// small picture by sendPhoto, both as replies to the message X-Reply-To
// names, with a User-Agent naming toolsvc and its version; an empty file
// is refused before anything is uploaded.
func TestSendMediaTelegramThreadsAndFallsBack(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			http.Error(w, `{"ok":false,"error_code":400,"description":"Bad Request: not multipart"}`, 400)
			return
		}
		method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		field := map[string]string{"sendPhoto": "photo", "sendDocument": "document"}[method]
		fh := r.MultipartForm.File[field]
		if len(fh) != 1 {
			http.Error(w, `{"ok":false,"error_code":400,"description":"Bad Request: no file"}`, 400)
			return
		}
		if method == "sendPhoto" {
			f, _ := fh[0].Open()
			c, err := png.DecodeConfig(f)
			f.Close()
			if err != nil || c.Width+c.Height > 10000 || max(c.Width, c.Height) > 20*min(c.Width, c.Height) {
				http.Error(w, `{"ok":false,"error_code":400,"description":"Bad Request: PHOTO_INVALID_DIMENSIONS"}`, 400)
				return
			}
		}
		calls = append(calls, method+" "+fh[0].Filename+" "+r.FormValue("reply_parameters")+" "+r.Header.Get("User-Agent"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true,"result":{"message_id":7}}`)
	}))
	defer api.Close()
	s := startServer(t, map[string]string{"TELEGRAM_BOT_TOKEN": "123:e2e-token", "TELEGRAM_BASE_URL": api.URL})
	pngOf := func(w, h int) string {
		var b bytes.Buffer
		_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)))
		return b.String()
	}
	s.writeWS(t, "shots/page.png", pngOf(300, 12000))
	s.writeWS(t, "shots/chart.png", pngOf(200, 100))
	s.writeWS(t, "shots/empty.pdf", "")

	res := s.invoke(t, "send_media", map[string]any{"file_paths": []string{"shots/page.png", "shots/chart.png", "shots/empty.pdf"}},
		"X-Session-ID", "telegram:default:-1001:1712345678", "X-Reply-To", "42")
	assertContains(t, "result", mustSucceed(t, res), "Sent 2 of 3 files to telegram", "- shots/page.png: sent", "- shots/chart.png: sent",
		"- shots/empty.pdf: refused: it is 0 B and chat platforms refuse empty files. Next:")
	ua := "toolsvc/" + version() + " (+https://github.com/countbot/toolsvc)"
	reply := `{"allow_sending_without_reply":true,"message_id":42}`
	want := []string{"sendDocument page.png " + reply + " " + ua, "sendPhoto chart.png " + reply + " " + ua}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}
