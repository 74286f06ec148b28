package channels

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
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

// Telegram's limits (https://core.telegram.org/bots/api#sendphoto and
// #sending-files): a photo at most 10 MB, its width and height at most
// 10000 together and their ratio at most 20 (beyond that sendPhoto
// answers PHOTO_INVALID_DIMENSIONS); other files uploaded as multipart at
// most 50 MB; captions up to 1024 characters, texts up to 4096.
const (
	telegramPhotoMax   = 10_000_000
	telegramPhotoSides = 10000
	telegramPhotoRatio = 20
	telegramUploadMax  = 50_000_000
	telegramCaptionMax = 1024
	telegramTextMax    = 4096
)

// Check applies Telegram's limits: a picture sendPhoto would refuse goes
// as a document instead, so only the 50 MB upload limit refuses.
func (t *Telegram) Check(f *File) string {
	if f.Size > telegramUploadMax {
		return "telegram takes uploads of at most 50 MB"
	}
	return ""
}

// photoFits reports whether sendPhoto takes f: small enough, and with
// dimensions it accepts (a long full-page screenshot is refused).
func photoFits(f *File) bool {
	if f.Size > telegramPhotoMax {
		return false
	}
	w, h, err := imageSize(f)
	if err != nil || w <= 0 || h <= 0 {
		return false
	}
	return w+h <= telegramPhotoSides && max(w, h) <= telegramPhotoRatio*min(w, h)
}

// telegramMethod is the Bot API method and its file field for f. A
// picture sendPhoto would refuse goes by sendDocument, as a file.
func telegramMethod(f *File) (method, field string) {
	switch {
	case f.Ext == "png" || f.Ext == "jpg" || f.Ext == "jpeg" || f.Ext == "webp":
		if photoFits(f) {
			return "sendPhoto", "photo"
		}
		return "sendDocument", "document"
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

// telegramReply is reply_parameters for the message m answers, or nil:
// Telegram's message IDs are integers, so another ID is not one of its
// messages and nothing is threaded. A reply whose message is gone is
// still sent (allow_sending_without_reply).
func telegramReplyTo(id string) map[string]any {
	n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil || n <= 0 {
		return nil
	}
	return map[string]any{"message_id": n, "allow_sending_without_reply": true}
}

func (t *Telegram) text(ctx context.Context, chat, s string, reply map[string]any) error {
	s = runes.Shorten(s, telegramTextMax)
	body := map[string]any{"chat_id": chat, "text": s}
	if reply != nil {
		body["reply_parameters"] = reply
	}
	b, _ := json.Marshal(body)
	_, err := t.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, t.url("sendMessage"), b)
	}, t.check)
	return err
}

func (t *Telegram) file(ctx context.Context, chat string, f *File, caption string, reply map[string]any) error {
	method, field := telegramMethod(f)
	parts := []part{{Name: "chat_id", Value: chat}}
	if caption != "" {
		parts = append(parts, part{Name: "caption", Value: caption})
	}
	if reply != nil {
		js, _ := json.Marshal(reply)
		parts = append(parts, part{Name: "reply_parameters", Value: string(js)})
	}
	parts = append(parts, part{Name: field, File: f})
	_, err := t.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		return newForm(parts...).request(ctx, t.url(method))
	}, t.check)
	return err
}

// Send posts each file, the caption on the first when it fits (else as a
// text message), each a reply to m.ReplyTo when it names a message.
func (t *Telegram) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	if chat == "" {
		return all(m, t.api.errorf(0, "no chat to send to: the session names none"))
	}
	reply := telegramReplyTo(m.ReplyTo)
	text := func(ctx context.Context, s string) error { return t.text(ctx, chat, s, reply) }
	if utf8.RuneCountInString(m.Caption) > telegramCaptionMax {
		out := sendEach(ctx, m, text, func(ctx context.Context, f *File) error { return t.file(ctx, chat, f, "", reply) })
		return out
	}
	return sendCaptioned(ctx, m, text, func(ctx context.Context, f *File, c string) error { return t.file(ctx, chat, f, c, reply) })
}

var _ Sender = (*Telegram)(nil)
