package channels

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// slackFake answers the external upload flow as Slack documents: a Bearer
// token on the Web API; files.getUploadURLExternal with filename and
// length (at least 1: an empty file is refused) as a form
// (https://api.slack.com/methods/files.getUploadURLExternal); the bytes
// posted to the upload URL (another host, without the token), exactly
// length of them; files.completeUploadExternal with files (id, title),
// channel_id, initial_comment and thread_ts
// (https://api.slack.com/methods/files.completeUploadExternal);
// chat.postMessage with channel, text and thread_ts
// (https://api.slack.com/methods/chat.postMessage). A thread_ts must be a
// message's ts ("1712345678.000100").
type slackFake struct {
	t        *testing.T
	mu       sync.Mutex
	limitNxt int
	uploaded map[string]string
	shared   []string
	upload   string // the upload host's URL
	sawToken bool   // the upload host was sent the token
}

func (f *slackFake) api(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	checkUA(f.t, r)
	if r.Header.Get("Authorization") != "Bearer xoxb-slack-token" {
		writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	if f.limitNxt > 0 {
		f.limitNxt--
		w.Header().Set("Retry-After", "4")
		w.WriteHeader(429)
		return
	}
	switch r.URL.Path {
	case "/api/files.getUploadURLExternal":
		if r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			f.t.Errorf("getUploadURLExternal content type %q", r.Header.Get("Content-Type"))
		}
		_ = r.ParseForm()
		name, length := r.PostForm.Get("filename"), r.PostForm.Get("length")
		if n, err := strconv.Atoi(length); name == "" || err != nil || n < 1 {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_arguments"})
			return
		}
		id := fmt.Sprintf("F%d", len(f.uploaded)+1)
		f.uploaded[id] = ""
		writeJSON(w, 200, map[string]any{"ok": true, "upload_url": f.upload + "/upload/v1/" + id + "?len=" + length, "file_id": id})
	case "/api/files.completeUploadExternal":
		var b struct {
			Files []struct {
				ID, Title string
			} `json:"files"`
			ChannelID      string `json:"channel_id"`
			InitialComment string `json:"initial_comment"`
			ThreadTS       string `json:"thread_ts"`
		}
		readJSON(f.t, r, &b)
		if b.ThreadTS != "" && !slackTSForm.MatchString(b.ThreadTS) {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_thread_ts"})
			return
		}
		if b.ChannelID == "C_NOT_IN" {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "not_in_channel"})
			return
		}
		for _, x := range b.Files {
			f.shared = append(f.shared, fmt.Sprintf("%s %s=%s %s comment=%q thread=%s", b.ChannelID, x.Title, f.uploaded[x.ID], x.ID, b.InitialComment, b.ThreadTS))
		}
		writeJSON(w, 200, map[string]any{"ok": true})
	case "/api/chat.postMessage":
		var b map[string]string
		readJSON(f.t, r, &b)
		if b["thread_ts"] != "" && !slackTSForm.MatchString(b["thread_ts"]) {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_thread_ts"})
			return
		}
		f.shared = append(f.shared, fmt.Sprintf("%s text=%q thread=%s", b["channel"], b["text"], b["thread_ts"]))
		writeJSON(w, 200, map[string]any{"ok": true})
	default:
		f.t.Errorf("unexpected path %s", r.URL.Path)
	}
}

// slackTSForm is a message's ts as Slack writes it.
var slackTSForm = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

func (f *slackFake) files(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "" {
		f.sawToken = true
	}
	id := strings.TrimPrefix(r.URL.Path, "/upload/v1/")
	b, _ := io.ReadAll(r.Body)
	if fmt.Sprint(len(b)) != r.URL.Query().Get("len") {
		f.t.Errorf("uploaded %d bytes, announced %s", len(b), r.URL.Query().Get("len"))
	}
	f.uploaded[id] = string(b)
	fmt.Fprintf(w, "OK - %d", len(b))
}

func TestSlack(t *testing.T) {
	sf := &slackFake{t: t, uploaded: map[string]string{}}
	apiSrv := fake(t, sf.api)
	filesSrv := fake(t, sf.files)
	sf.upload = filesSrv.URL
	clk := newClock()
	sl := NewSlack(SlackAccount{Token: "xoxb-slack-token", BaseURL: apiSrv.URL + "/api"}, testOptions(clk))
	ctx := context.Background()
	csv := memFile(t, "d.csv", []byte("a,b"))
	gif := memFile(t, "g.gif", []byte("GIF89a"))

	mustSend(t, sl.Send(ctx, &Message{Target: Target{ChatID: "C1"}, Caption: "data", Files: []*File{csv, gif}}))
	want := []string{`C1 d.csv=a,b F1 comment="data" thread=`, `C1 g.gif=GIF89a F2 comment="" thread=`}
	if !slices.Equal(sf.shared, want) {
		t.Errorf("shared:\n%s", strings.Join(sf.shared, "\n"))
	}
	if sf.sawToken {
		t.Error("the token was sent to the upload host")
	}
	t.Run("thread", func(t *testing.T) {
		sf.shared = nil
		mustSend(t, sl.Send(ctx, &Message{Target: Target{ChatID: "C1"}, Caption: "in thread", Files: []*File{csv}, ReplyTo: "1712345678.000100"}))
		mustSend(t, sl.Send(ctx, &Message{Target: Target{ChatID: "C1"}, Caption: "text only", ReplyTo: "1712345678.000100"}))
		want := []string{`C1 d.csv=a,b F3 comment="in thread" thread=1712345678.000100`, `C1 text="text only" thread=1712345678.000100`}
		if !slices.Equal(sf.shared, want) {
			t.Errorf("shared:\n%s", strings.Join(sf.shared, "\n"))
		}
	})
	t.Run("the fake refuses an empty file, as Slack does", func(t *testing.T) {
		out := sl.Send(ctx, &Message{Target: Target{ChatID: "C1"}, Files: []*File{memFile(t, "e.txt", nil)}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "invalid_arguments") {
			t.Errorf("got %v", out.Files[0])
		}
		if r := CheckFile(sl, memFile(t, "e.txt", nil)); !strings.Contains(r, "empty") || !strings.Contains(r, "Next:") {
			t.Errorf("CheckFile: %q", r)
		}
	})
	t.Run("429 then success", func(t *testing.T) {
		sf.mu.Lock()
		sf.limitNxt = 1
		sf.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, sl.Send(ctx, &Message{Target: Target{ChatID: "C1"}, Files: []*File{csv}}))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{4 * time.Second}) {
			t.Errorf("waits %v", s)
		}
	})
	t.Run("not shared is a failure", func(t *testing.T) {
		out := sl.Send(ctx, &Message{Target: Target{ChatID: "C_NOT_IN"}, Files: []*File{csv}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "not_in_channel") {
			t.Errorf("got %v", out.Files[0])
		}
	})
	t.Run("bad token", func(t *testing.T) {
		bad := NewSlack(SlackAccount{Token: "xoxb-wrong", BaseURL: apiSrv.URL + "/api"}, testOptions(clk))
		out := bad.Send(ctx, &Message{Target: Target{ChatID: "C1"}, Files: []*File{csv}})
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "invalid_auth") {
			t.Errorf("got %v", out.Files[0])
		}
	})
}
