package channels

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/runes"
)

// TelegramAccount is a Telegram bot: its token from @BotFather and the Bot
// API's base URL (https://api.telegram.org, or a local Bot API server).
type TelegramAccount struct {
	Token, BaseURL string
}

// Telegram sends each file with the Bot API method of its kind
// (sendPhoto, sendAnimation, sendVideo, sendAudio, sendDocument), the
// caption on the first. The token is part of every URL, so errors never
// quote one.
type Telegram struct {
	acct TelegramAccount
	api  api
}

// NewTelegram returns the sender of one Telegram bot.
func NewTelegram(acct TelegramAccount, o Options) *Telegram {
	acct.BaseURL = strings.TrimRight(acct.BaseURL, "/")
	t := &Telegram{acct: acct, api: api{name: "telegram", o: o.withDefaults()}}
	t.api.limited = t.limited
	return t
}

// Telegram's limits: photos up to 10 MB, other uploads up to 50 MB;
// captions up to 1024 characters, texts up to 4096.
const (
	telegramPhotoMax   = 10 << 20
	telegramCaptionMax = 1024
	telegramTextMax    = 4096
)

// Check applies Telegram's limits.
func (t *Telegram) Check(f *File) string {
	if method, _ := telegramMethod(f); method == "sendPhoto" {
		return limitFor("telegram", f, telegramPhotoMax, "photos")
	}
	return ""
}

// telegramMethod is the Bot API method and its file field for f.
func telegramMethod(f *File) (method, field string) {
	switch {
	case f.Ext == "png" || f.Ext == "jpg" || f.Ext == "jpeg" || f.Ext == "webp":
		return "sendPhoto", "photo"
	case f.Ext == "gif":
		return "sendAnimation", "animation"
	case f.Ext == "mp4":
		return "sendVideo", "video"
	case f.Ext == "mp3":
		return "sendAudio", "audio"
	}
	return "sendDocument", "document"
}

type telegramReply struct {
	OK          bool   `json:"ok"`
	ErrorCode   int    `json:"error_code"`
	Description string `json:"description"`
	Parameters  struct {
		RetryAfter float64 `json:"retry_after"`
	} `json:"parameters"`
}

// limited reads the wait of a 429 from parameters.retry_after.
func (t *Telegram) limited(r *reply) (time.Duration, bool) {
	var tr telegramReply
	if r.Status != http.StatusTooManyRequests || json.Unmarshal(r.Body, &tr) != nil || tr.Parameters.RetryAfter <= 0 {
		return 0, false
	}
	return capWait(time.Duration(tr.Parameters.RetryAfter * float64(time.Second))), true
}

func (t *Telegram) url(method string) string {
	return t.acct.BaseURL + "/bot" + t.acct.Token + "/" + method
}

func (t *Telegram) check(r *reply) error {
	var tr telegramReply
	if json.Unmarshal(r.Body, &tr) != nil {
		return t.api.errorf(r.Status, "unreadable answer: %s", runes.Shorten(strings.TrimSpace(string(r.Body)), 200))
	}
	if !tr.OK {
		return t.api.errorf(r.Status, "%d %s", tr.ErrorCode, tr.Description)
	}
	return nil
}

func (t *Telegram) text(ctx context.Context, chat, s string) error {
	s = runes.Shorten(s, telegramTextMax)
	b, _ := json.Marshal(map[string]string{"chat_id": chat, "text": s})
	_, err := t.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, t.url("sendMessage"), b)
	}, t.check)
	return err
}

func (t *Telegram) file(ctx context.Context, chat string, f *File, caption string) error {
	method, field := telegramMethod(f)
	parts := []part{{Name: "chat_id", Value: chat}}
	if caption != "" {
		parts = append(parts, part{Name: "caption", Value: caption})
	}
	parts = append(parts, part{Name: field, File: f})
	_, err := t.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return newForm(parts...).request(ctx, t.url(method))
	}, t.check)
	return err
}

// Send posts each file, the caption on the first when it fits (else as a
// text message).
func (t *Telegram) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	if chat == "" {
		return all(m, t.api.errorf(0, "no chat to send to: the session names none"))
	}
	text := func(ctx context.Context, s string) error { return t.text(ctx, chat, s) }
	if utf8.RuneCountInString(m.Caption) > telegramCaptionMax {
		out := sendEach(ctx, m, text, func(ctx context.Context, f *File) error { return t.file(ctx, chat, f, "") })
		return out
	}
	return sendCaptioned(ctx, m, text, func(ctx context.Context, f *File, c string) error { return t.file(ctx, chat, f, c) })
}

var _ Sender = (*Telegram)(nil)
