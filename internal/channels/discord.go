package channels

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// DiscordAccount is a Discord bot (Token, with BaseURL
// https://discord.com/api/v10, sending to the channel the chat ID names) or,
// with WebhookURL set, a channel webhook, which always posts to its own
// channel.
type DiscordAccount struct {
	Token, BaseURL string
	WebhookURL     string
}

// Discord posts one message per file as multipart: payload_json (content
// and the attachment's id and filename) and files[0].
type Discord struct {
	acct DiscordAccount
	api  api
}

// NewDiscord returns the sender of one Discord bot or webhook.
func NewDiscord(acct DiscordAccount, o Options) *Discord {
	acct.BaseURL = strings.TrimRight(acct.BaseURL, "/")
	d := &Discord{acct: acct, api: api{name: "discord", o: o.withDefaults()}}
	d.api.limited = d.limited
	return d
}

// Discord's limits: 10 MB a file for uploads by bots and webhooks, 2000
// characters of content.
const (
	discordFileMax    = 10 << 20
	discordContentMax = 2000
)

// Check applies Discord's limit.
func (d *Discord) Check(f *File) string {
	return limitFor("discord", f, discordFileMax, "files")
}

// limited reads retry_after (seconds, fractional) from a 429's body, which
// is finer than its Retry-After header.
func (d *Discord) limited(r *reply) (time.Duration, bool) {
	var b struct {
		RetryAfter float64 `json:"retry_after"`
	}
	if r.Status != http.StatusTooManyRequests || json.Unmarshal(r.Body, &b) != nil || b.RetryAfter <= 0 {
		return 0, false
	}
	return capWait(time.Duration(b.RetryAfter * float64(time.Second))), true
}

func (d *Discord) target(chat string) (string, error) {
	if d.acct.WebhookURL != "" {
		return addQuery(d.acct.WebhookURL, "wait", "true"), nil
	}
	if chat == "" {
		return "", d.api.errorf(0, "no channel to send to: the session names none")
	}
	return d.acct.BaseURL + "/channels/" + url.PathEscape(chat) + "/messages", nil
}

func (d *Discord) check(r *reply) error {
	if r.Status >= 200 && r.Status <= 299 {
		return nil
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(r.Body, &e) != nil {
		e.Message = runes.Shorten(strings.TrimSpace(string(r.Body)), 200)
	}
	return d.api.errorf(r.Status, "%d %s", e.Code, e.Message)
}

func (d *Discord) post(ctx context.Context, chat, content, replyTo string, f *File) error {
	u, err := d.target(chat)
	if err != nil {
		return err
	}
	content = runes.Shorten(content, discordContentMax)
	payload := map[string]any{"content": content, "allowed_mentions": map[string]any{"parse": []string{}}}
	if replyTo != "" {
		// A reply (https://discord.com/developers/docs/resources/message#message-reference-structure);
		// one whose message is gone is sent anyway.
		payload["message_reference"] = map[string]any{"message_id": replyTo, "fail_if_not_exists": false}
	}
	parts := []part{{}}
	if f != nil {
		payload["attachments"] = []map[string]any{{"id": 0, "filename": f.Name}}
		parts = append(parts, part{Name: "files[0]", File: f})
	}
	js, _ := json.Marshal(payload)
	parts[0] = part{Name: "payload_json", Value: string(js)}
	_, err = d.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := newForm(parts...).request(ctx, u)
		if err == nil && d.acct.WebhookURL == "" {
			req.Header.Set("Authorization", "Bot "+d.acct.Token)
		}
		return req, err
	}, d.check)
	return err
}

// Send posts each file, the caption as the first one's content, each a
// reply to m.ReplyTo when it names a message (a snowflake).
func (d *Discord) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	reply := ""
	if _, err := strconv.ParseUint(m.ReplyTo, 10, 64); err == nil {
		reply = m.ReplyTo
	}
	return sendCaptioned(ctx, m, func(ctx context.Context, s string) error { return d.post(ctx, chat, s, reply, nil) },
		func(ctx context.Context, f *File, c string) error { return d.post(ctx, chat, c, reply, f) })
}

var _ Sender = (*Discord)(nil)

// NeedsChat is false for a webhook, which posts to its own channel.
func (d *Discord) NeedsChat() bool { return d.acct.WebhookURL == "" }
