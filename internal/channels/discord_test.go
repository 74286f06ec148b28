package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// discordFake answers as Discord documents: a User-Agent of the form
// "DiscordBot ($url, $versionNumber)"
// (https://discord.com/developers/docs/reference#user-agent), refused
// otherwise; "Bot <token>" for a bot (none for a webhook, whose token is
// in its path); multipart with payload_json whose attachments name
// files[n] (https://discord.com/developers/docs/reference#uploading-files),
// content at most 2000 characters, files at most 10 MB, a
// message_reference whose message_id is a snowflake
// (https://discord.com/developers/docs/resources/message#create-message);
// and a 429 with a fractional retry_after
// (https://discord.com/developers/docs/topics/rate-limits).
type discordFake struct {
	t        *testing.T
	mu       sync.Mutex
	limitNxt int
	posts    []string
}

// discordUA is the documented User-Agent form.
var discordUA = regexp.MustCompile(`^DiscordBot \((https?://[^,()]+), ([^,()]+)\)$`)

func (f *discordFake) handler(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !discordUA.MatchString(r.Header.Get("User-Agent")) {
		// Discord answers 400 or blocks clients without it; say why.
		f.t.Errorf("User-Agent %q is not DiscordBot ($url, $version)", r.Header.Get("User-Agent"))
		writeJSON(w, 400, map[string]any{"code": 0, "message": "invalid User-Agent"})
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/webhooks/"):
		if r.URL.Path != "/api/webhooks/42/hook-token" || r.Header.Get("Authorization") != "" || r.URL.Query().Get("wait") != "true" {
			writeJSON(w, 401, map[string]any{"code": 50027, "message": "Invalid Webhook Token"})
			return
		}
	case r.Header.Get("Authorization") != "Bot discord-bot-token":
		writeJSON(w, 401, map[string]any{"code": 0, "message": "401: Unauthorized"})
		return
	}
	if f.limitNxt > 0 {
		f.limitNxt--
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 429, map[string]any{"message": "You are being rate limited.", "retry_after": 0.25, "global": false})
		return
	}
	fd := readForm(f.t, r)
	var p struct {
		Content     string `json:"content"`
		Attachments []struct {
			ID       int    `json:"id"`
			Filename string `json:"filename"`
		} `json:"attachments"`
		Reference *struct {
			MessageID string `json:"message_id"`
		} `json:"message_reference"`
	}
	if err := json.Unmarshal([]byte(fd.Values["payload_json"]), &p); err != nil {
		f.t.Errorf("payload_json: %v", err)
	}
	if len(p.Attachments) != len(fd.Files) || (len(p.Attachments) == 1 && fd.Filenames["files[0]"] != p.Attachments[0].Filename) {
		f.t.Errorf("attachments %+v vs files %v", p.Attachments, fd.Filenames)
	}
	reply := ""
	if p.Reference != nil {
		reply = p.Reference.MessageID
	}
	switch {
	case utf8.RuneCountInString(p.Content) > 2000:
		writeJSON(w, 400, map[string]any{"code": 50035, "message": "Invalid Form Body: content must be 2000 or fewer in length"})
		return
	case len(fd.Files["files[0]"]) > 10<<20:
		writeJSON(w, 413, map[string]any{"code": 40005, "message": "Request entity too large"})
		return
	case p.Reference != nil && !regexp.MustCompile(`^[0-9]{1,20}$`).MatchString(reply):
		writeJSON(w, 400, map[string]any{"code": 50035, "message": "Invalid Form Body: message_reference.message_id is not snowflake"})
		return
	}
	f.posts = append(f.posts, fmt.Sprintf("%s content=%q files=%q reply=%s", r.URL.Path, p.Content, fd.Files["files[0]"], reply))
	writeJSON(w, 200, map[string]any{"id": "1"})
}

func TestDiscord(t *testing.T) {
	df := &discordFake{t: t}
	srv := fake(t, df.handler)
	clk := newClock()
	ctx := context.Background()
	png := memFile(t, "p.png", []byte("png"))
	txt := memFile(t, "n.txt", []byte("notes"))

	bot := NewDiscord(DiscordAccount{Token: "discord-bot-token", BaseURL: srv.URL + "/api/v10"}, testOptions(clk))
	mustSend(t, bot.Send(ctx, &Message{Target: Target{ChatID: "1234"}, Caption: "hi", Files: []*File{png, txt}}))
	hook := NewDiscord(DiscordAccount{WebhookURL: srv.URL + "/api/webhooks/42/hook-token"}, testOptions(clk))
	mustSend(t, hook.Send(ctx, &Message{Caption: "only text"}))
	mustSend(t, bot.Send(ctx, &Message{Target: Target{ChatID: "1234"}, Caption: "re", Files: []*File{txt}, ReplyTo: "1198765432109876543"}))
	mustSend(t, bot.Send(ctx, &Message{Target: Target{ChatID: "1234"}, Files: []*File{txt}, ReplyTo: "om_not_discord"}))
	want := []string{
		`/api/v10/channels/1234/messages content="hi" files="png" reply=`,
		`/api/v10/channels/1234/messages content="" files="notes" reply=`,
		`/api/webhooks/42/hook-token content="only text" files="" reply=`,
		`/api/v10/channels/1234/messages content="re" files="notes" reply=1198765432109876543`,
		`/api/v10/channels/1234/messages content="" files="notes" reply=`,
	}
	if !slices.Equal(df.posts, want) {
		t.Errorf("posts:\n%s", strings.Join(df.posts, "\n"))
	}
	t.Run("429 waits retry_after", func(t *testing.T) {
		df.mu.Lock()
		df.limitNxt = 1
		df.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, hook.Send(ctx, &Message{Files: []*File{txt}}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{250 * time.Millisecond}) {
			t.Errorf("waits %v", s)
		}
	})
	t.Run("refusal", func(t *testing.T) {
		bad := NewDiscord(DiscordAccount{WebhookURL: srv.URL + "/api/webhooks/42/wrong"}, testOptions(clk))
		out := bad.Send(ctx, &Message{Files: []*File{txt}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "Invalid Webhook Token") {
			t.Errorf("got %v", out.Files[0])
		}
		if r := bot.Check(&File{Name: "b.zip", Ext: "zip", Size: 11 << 20}); !strings.Contains(r, "10 MB") {
			t.Errorf("11 MB: %q", r)
		}
	})
}
