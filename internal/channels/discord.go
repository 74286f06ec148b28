package channels

import (
	"context"
	"encoding/json"
	"fmt"
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

// target is where a message goes: the bot's channel, or the webhook's
// URL, with thread_id when the message answers one: Execute Webhook takes
// no message_reference, and posts into a thread of the webhook's channel
// by that query parameter
// (https://discord.com/developers/docs/resources/webhook#execute-webhook).
func (d *Discord) target(chat, reply string) (string, error) {
	if d.acct.WebhookURL != "" {
		u := addQuery(d.acct.WebhookURL, "wait", "true")
		if reply != "" {
			u = addQuery(u, "thread_id", reply)
		}
		return u, nil
	}
	if chat == "" {
		return "", d.api.errorf(0, "no channel to send to: the session names none")
	}
	return d.acct.BaseURL + "/channels/" + url.PathEscape(chat) + "/messages", nil
}

// discordUnknownChannel is Discord's code for a channel (a thread
// included) that does not exist or cannot be seen.
const discordUnknownChannel = 10003

func (d *Discord) check(r *reply, thread string) error {
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
	if e.Code == discordUnknownChannel && thread != "" {
		return d.api.errorf(r.Status, "%d %s: X-Reply-To (%s) names no thread of the webhook's channel, which a webhook can answer in only by the thread's ID. "+
			"Next: call again without X-Reply-To to post in the webhook's channel", e.Code, e.Message, thread)
	}
	return d.api.errorf(r.Status, "%d %s", e.Code, e.Message)
}

// post sends one message of at most discordContentMax characters (Send
// splits longer ones): a bot's answers replyTo by message_reference, a
// webhook's goes into the thread replyTo names.
func (d *Discord) post(ctx context.Context, chat, content, replyTo string, f *File) error {
	u, err := d.target(chat, replyTo)
	if err != nil {
		return err
	}
	payload := map[string]any{"content": content, "allowed_mentions": map[string]any{"parse": []string{}}}
	if replyTo != "" && d.acct.WebhookURL == "" {
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
	}, func(r *reply) error {
		if d.acct.WebhookURL != "" {
			return d.check(r, replyTo)
		}
		return d.check(r, "")
	})
	return err
}

// Send posts each file, the caption as the first one's content, each a
// reply to m.ReplyTo when it names a message (a snowflake; for a webhook,
// a thread). A caption over Discord's 2000 characters goes in parts, in
// order, cut at line breaks where it can: all but the last as text
// messages, the last with the first file.
func (d *Discord) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	reply := ""
	if _, err := strconv.ParseUint(m.ReplyTo, 10, 64); err == nil {
		reply = m.ReplyTo
	}
	text := func(ctx context.Context, s string) error { return d.post(ctx, chat, s, reply, nil) }
	file := func(ctx context.Context, f *File, c string) error { return d.post(ctx, chat, c, reply, f) }
	parts := []string{m.Caption}
	if strings.TrimSpace(m.Caption) != "" {
		parts = splitRunes(m.Caption, discordContentMax)
	}
	n := len(parts)
	for i, p := range parts[:n-1] {
		if err := text(ctx, p); err != nil {
			rest := *m
			rest.Caption = ""
			out := sendCaptioned(ctx, &rest, text, file)
			out.Caption = discordPartErr(i+1, n, err)
			return out
		}
	}
	last := *m
	last.Caption = parts[n-1]
	out := sendCaptioned(ctx, &last, text, file)
	if out.Caption != nil && n > 1 {
		out.Caption = discordPartErr(n, n, out.Caption)
	}
	return out
}

// discordPartErr says which part of a long caption failed.
func discordPartErr(i, n int, err error) error {
	return fmt.Errorf("part %d of %d (Discord takes at most 2000 characters a message, so the message went in parts; the parts before it were sent, the rest not): %w", i, n, err)
}

var _ Sender = (*Discord)(nil)

// NeedsChat is false for a webhook, which posts to its own channel.
func (d *Discord) NeedsChat() bool { return d.acct.WebhookURL == "" }
