package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/countbot/toolsvc/internal/runes"
)

// SlackAccount is a Slack app's bot token (xoxb-...) and the Web API's base
// URL (https://slack.com/api).
type SlackAccount struct {
	Token, BaseURL string
}

// Slack uploads with the external flow: files.getUploadURLExternal gives
// an upload URL and a file ID, the file goes to that URL (without the
// token: it is another host), and files.completeUploadExternal shares it
// in the channel, the caption as its initial comment.
type Slack struct {
	acct SlackAccount
	api  api
}

// NewSlack returns the sender of one Slack app.
func NewSlack(acct SlackAccount, o Options) *Slack {
	acct.BaseURL = strings.TrimRight(acct.BaseURL, "/")
	return &Slack{acct: acct, api: api{name: "slack", o: o.withDefaults()}}
}

// Check adds nothing to the common limits (CheckFile refuses the empty
// files Slack refuses): Slack takes up to 1 GB.
func (s *Slack) Check(*File) string { return "" }

type slackReply struct {
	OK        bool   `json:"ok"`
	Error     string `json:"error"`
	UploadURL string `json:"upload_url"`
	FileID    string `json:"file_id"`
}

// call makes an authorized Web API request and checks "ok".
func (s *Slack) call(ctx context.Context, method string, build func(ctx context.Context, u string) (*http.Request, error)) (slackReply, error) {
	var sr slackReply
	_, err := s.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := build(ctx, s.acct.BaseURL+"/"+method)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+s.acct.Token)
		}
		return req, err
	}, func(r *reply) error {
		if json.Unmarshal(r.Body, &sr) != nil {
			return s.api.errorf(r.Status, "%s: unreadable answer: %s", method, runes.Shorten(strings.TrimSpace(string(r.Body)), 200))
		}
		if !sr.OK {
			return s.api.errorf(r.Status, "%s: %s", method, sr.Error)
		}
		return nil
	})
	return sr, err
}

func (s *Slack) text(ctx context.Context, chat, text, thread string) error {
	body := map[string]string{"channel": chat, "text": text}
	if thread != "" {
		body["thread_ts"] = thread
	}
	b, _ := json.Marshal(body)
	_, err := s.call(ctx, "chat.postMessage", func(ctx context.Context, u string) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, u, b)
	})
	return err
}

func (s *Slack) file(ctx context.Context, chat string, f *File, caption, thread string) error {
	form := url.Values{"filename": {f.Name}, "length": {strconv.FormatInt(f.Size, 10)}}.Encode()
	up, err := s.call(ctx, "files.getUploadURLExternal", func(ctx context.Context, u string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		return req, err
	})
	if err != nil {
		return err
	}
	if pu, err := url.Parse(up.UploadURL); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || up.FileID == "" {
		return s.api.errorf(0, "files.getUploadURLExternal returned no usable upload URL")
	}
	// The upload URL is authorized by itself; the token stays home.
	_, err = s.api.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.UploadURL, io.NopCloser(f.reader()))
		if err == nil {
			req.ContentLength = f.Size
			req.Header.Set("Content-Type", f.contentType())
		}
		return req, err
	}, func(r *reply) error {
		if r.Status != http.StatusOK {
			return s.api.errorf(r.Status, "upload: %s", runes.Shorten(strings.TrimSpace(string(r.Body)), 200))
		}
		return nil
	})
	if err != nil {
		return err
	}
	body := map[string]any{"files": []map[string]string{{"id": up.FileID, "title": f.Name}}, "channel_id": chat}
	if caption != "" {
		body["initial_comment"] = caption
	}
	if thread != "" {
		body["thread_ts"] = thread
	}
	b, _ := json.Marshal(body)
	_, err = s.call(ctx, "files.completeUploadExternal", func(ctx context.Context, u string) (*http.Request, error) {
		return jsonRequest(ctx, http.MethodPost, u, b)
	})
	if err != nil {
		return fmt.Errorf("uploaded but not shared: %w", err)
	}
	return nil
}

// Send shares each file in the channel, the caption with the first; in
// the thread of m.ReplyTo when it names a message (its ts, "1712345678.000100").
func (s *Slack) Send(ctx context.Context, m *Message) Outcome {
	chat := m.Target.ChatID
	if chat == "" {
		return all(m, s.api.errorf(0, "no channel to send to: the session names none"))
	}
	thread := ""
	if slackTS.MatchString(m.ReplyTo) {
		thread = m.ReplyTo
	}
	return sendCaptioned(ctx, m, func(ctx context.Context, t string) error { return s.text(ctx, chat, t, thread) },
		func(ctx context.Context, f *File, c string) error { return s.file(ctx, chat, f, c, thread) })
}

// slackTS is the form of a message's ts, which names it within a channel.
var slackTS = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)

var _ Sender = (*Slack)(nil)
