package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
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
// (https://discord.com/developers/docs/topics/rate-limits). A webhook
// (https://discord.com/developers/docs/resources/webhook#execute-webhook)
// posts into one of its channel's threads by the thread_id query
// parameter, answered 10003 Unknown Channel for a thread it does not
// have; its JSON parameters have no message_reference, so one sent is
// not a reply (the fake ignores it, as Discord does unknown fields).
type discordFake struct {
	t        *testing.T
	mu       sync.Mutex
	limitNxt int
	threads  []string // the webhook channel's threads
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
	reply, thread := "", ""
	if p.Reference != nil {
		reply = p.Reference.MessageID
	}
	webhook := strings.HasPrefix(r.URL.Path, "/api/webhooks/")
	if webhook {
		if thread = r.URL.Query().Get("thread_id"); thread != "" && !slices.Contains(f.threads, thread) {
			writeJSON(w, 400, map[string]any{"code": 10003, "message": "Unknown Channel"})
			return
		}
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
	if webhook {
		reply = "" // not a field of Execute Webhook
	}
	post := fmt.Sprintf("%s content=%q files=%q reply=%s", r.URL.Path, p.Content, fd.Files["files[0]"], reply)
	if thread != "" {
		post += " thread=" + thread
	}
	f.posts = append(f.posts, post)
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

// TestDiscordWebhookThread: a webhook answers in a thread by the
// thread_id query parameter of Execute Webhook, which has no
// message_reference; a thread the webhook's channel does not have fails
// with what to do.
// Doc: https://discord.com/developers/docs/resources/webhook#execute-webhook
func TestDiscordWebhookThread(t *testing.T) {
	df := &discordFake{t: t, threads: []string{"1198765432109876543"}}
	srv := fake(t, df.handler)
	clk := newClock()
	ctx := context.Background()
	txt := memFile(t, "n.txt", []byte("notes"))
	hook := NewDiscord(DiscordAccount{WebhookURL: srv.URL + "/api/webhooks/42/hook-token"}, testOptions(clk))
	mustSend(t, hook.Send(ctx, &Message{Caption: "in the thread", Files: []*File{txt}, ReplyTo: "1198765432109876543"}))
	mustSend(t, hook.Send(ctx, &Message{Caption: "not a snowflake", ReplyTo: "om_x"}))
	want := []string{
		`/api/webhooks/42/hook-token content="in the thread" files="notes" reply= thread=1198765432109876543`,
		`/api/webhooks/42/hook-token content="not a snowflake" files="" reply=`,
	}
	if !slices.Equal(df.posts, want) {
		t.Errorf("posts:\n%s\nwant\n%s", strings.Join(df.posts, "\n"), strings.Join(want, "\n"))
	}
	out := hook.Send(ctx, &Message{Files: []*File{txt}, ReplyTo: "1111111111111111111"})
	if err := out.Files[0]; err == nil || !strings.Contains(err.Error(), "Unknown Channel") || !strings.Contains(err.Error(), "Next:") {
		t.Errorf("unknown thread: %v, want Discord's refusal and what to do", err)
	}
}

// TestDiscordLongContent: Discord takes at most 2000 characters of
// content a message, so a longer caption goes in parts of at most 2000,
// in order, the last with the first file, and nothing is cut.
// Doc: https://discord.com/developers/docs/resources/message#create-message
// and https://discord.com/developers/docs/resources/webhook#execute-webhook
func TestDiscordLongContent(t *testing.T) {
	df := &discordFake{t: t}
	srv := fake(t, df.handler)
	clk := newClock()
	ctx := context.Background()
	txt := memFile(t, "n.txt", []byte("notes"))
	caption := strings.Repeat("第"+strings.Repeat("é", 98)+"\n", 45) // 4500 characters, 9000 bytes
	bot := NewDiscord(DiscordAccount{Token: "discord-bot-token", BaseURL: srv.URL + "/api/v10"}, testOptions(clk))
	hook := NewDiscord(DiscordAccount{WebhookURL: srv.URL + "/api/webhooks/42/hook-token"}, testOptions(clk))
	for name, c := range map[string]struct {
		d     *Discord
		files []*File
	}{"bot with a file": {bot, []*File{txt}}, "webhook, text only": {hook, nil}} {
		df.mu.Lock()
		df.posts = nil
		df.mu.Unlock()
		mustSend(t, c.d.Send(ctx, &Message{Target: Target{ChatID: "1234"}, Caption: caption, Files: c.files}))
		var joined strings.Builder
		re := regexp.MustCompile(`content="((?:[^"\\]|\\.)*)" files="([^"]*)"`)
		for i, p := range df.posts {
			m := re.FindStringSubmatch(p)
			content, _ := strconv.Unquote(`"` + m[1] + `"`)
			if n := utf8.RuneCountInString(content); n > 2000 {
				t.Errorf("%s: post %d has %d characters", name, i, n)
			}
			if (m[2] != "") != (len(c.files) > 0 && i == len(df.posts)-1) {
				t.Errorf("%s: post %d files=%q; the file goes with the last part", name, i, m[2])
			}
			joined.WriteString(content)
		}
		if len(df.posts) != 3 || joined.String() != caption {
			t.Errorf("%s: %d posts; joined equal to the caption: %v", name, len(df.posts), joined.String() == caption)
		}
	}
}
