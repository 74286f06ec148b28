package channels

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
)

// WebhookAccount is the generic webhook of toolsvc: one multipart POST per
// message to URL, with a "payload" field (JSON: session, channel, account,
// chat_id, caption, reply_to (the X-Reply-To the call came with, when
// any) and the files' names, kinds and sizes) and one "files"
// field per file, in the payload's order. With a Secret, the request
// carries X-Toolsvc-Timestamp (Unix seconds) and X-Toolsvc-Signature:
// "sha256=" and the hex HMAC-SHA256, keyed with the secret, of the
// timestamp, a ".", and the whole body.
type WebhookAccount struct {
	URL    string
	Secret string
}

// Webhook sends to a WebhookAccount.
type Webhook struct {
	acct WebhookAccount
	api  api
}

// NewWebhook returns the sender of one webhook.
func NewWebhook(acct WebhookAccount, o Options) *Webhook {
	return &Webhook{acct: acct, api: api{name: "webhook", o: o.withDefaults()}}
}

// WebhookPayload is the JSON of the "payload" field.
type WebhookPayload struct {
	Session string        `json:"session"`
	Channel string        `json:"channel"`
	Account string        `json:"account"`
	ChatID  string        `json:"chat_id"`
	Caption string        `json:"caption"`
	ReplyTo string        `json:"reply_to,omitempty"`
	Files   []WebhookFile `json:"files"`
}

// WebhookFile describes one file of the payload.
type WebhookFile struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Type string `json:"content_type"`
	Size int64  `json:"size"`
}

// Check refuses nothing beyond the common limit.
func (w *Webhook) Check(f *File) string { return limitFor("the webhook", f, MaxFileSize, "files") }

// Send posts the whole message in one request: every file shares its fate.
func (w *Webhook) Send(ctx context.Context, m *Message) Outcome {
	p := WebhookPayload{Session: m.Session, Channel: m.Target.Channel, Account: m.Target.Account, ChatID: m.Target.ChatID, Caption: m.Caption, ReplyTo: m.ReplyTo}
	parts := []part{{}}
	for _, f := range m.Files {
		p.Files = append(p.Files, WebhookFile{Name: f.Name, Kind: f.Kind.String(), Type: f.contentType(), Size: f.Size})
		parts = append(parts, part{Name: "files", File: f})
	}
	js, err := json.Marshal(p)
	if err != nil {
		return all(m, err)
	}
	parts[0] = part{Name: "payload", Value: string(js)}
	_, err = w.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		fm := newForm(parts...)
		var ts, sig string
		if w.acct.Secret != "" {
			ts = strconv.FormatInt(w.api.o.Now().Unix(), 10)
			mac := hmac.New(sha256.New, []byte(w.acct.Secret))
			mac.Write([]byte(ts + "."))
			// The files are read once for the signature and once more
			// as the body streams: memory stays bounded.
			if err := fm.write(mac, true); err != nil {
				return nil, err
			}
			sig = "sha256=" + hex.EncodeToString(mac.Sum(nil))
		}
		req, err := fm.request(ctx, w.acct.URL)
		if err != nil {
			return nil, err
		}
		if sig != "" {
			req.Header.Set("X-Toolsvc-Timestamp", ts)
			req.Header.Set("X-Toolsvc-Signature", sig)
		}
		return req, nil
	}, w.ok)
	return all(m, err)
}

// ok accepts any 2xx.
func (w *Webhook) ok(r *reply) error {
	if r.Status < 200 || r.Status > 299 {
		return w.api.errorf(r.Status, "%s", string(r.Body))
	}
	return nil
}

// all gives every part of m the same outcome.
func all(m *Message, err error) Outcome {
	out := Outcome{Files: make([]error, len(m.Files))}
	for i := range out.Files {
		out.Files[i] = err
	}
	if m.Caption != "" {
		out.Caption = err
	}
	return out
}

var _ Sender = (*Webhook)(nil)

// NeedsChat is false: the receiver decides what an empty chat means.
func (w *Webhook) NeedsChat() bool { return false }
