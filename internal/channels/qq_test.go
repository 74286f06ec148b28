package channels

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/medialink"
	"github.com/countbot/toolsvc/internal/workspace"
)

// qqFake is QQ's bot API v2 as its documentation describes it, enforcing
// the documented rules that today's senders must meet:
//
//   - the app access token
//     (https://bot.q.qq.com/wiki/develop/api-v2/dev-prepare/interface-framework/api-use.html):
//     POST {appId, clientSecret}, answered with access_token and expires_in
//     as a string; every call carries "QQBot <token>" and X-Union-Appid.
//   - sending (https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html):
//     POST /v2/users/{openid}/messages and /v2/groups/{group_openid}/messages
//     with the documented fields only (content, msg_type, markdown,
//     keyboard, ark, media, message_reference, event_id, msg_id, msg_seq);
//     msg_type required; content required in groups and not empty with
//     msg_type 7 ("a space"); proactive push is withdrawn since 2025-04-21,
//     so a message without msg_id or event_id is refused with
//     40034102 "主动消息失败, 无权限" (the code public reports show); a
//     msg_id + msg_seq sent before is refused (msg_seq defaults to 1) with
//     40054005, the code public reports show; each message takes at most
//     5 replies, the sixth is refused with 22009 "msg limit exceed". A
//     reply by event_id is counted and de-duplicated the same way, by
//     event_id + msg_seq (public reports of 40054005 on event replies).
//     Replies are taken within 60 minutes of the user's message in a
//     one-to-one chat and 5 minutes in a group ("被动消息（回复类）有效时间为
//     60 分钟" / "5 分钟"); a later one is refused (the doc names no code;
//     public reports show "回复消息msg_id已过期", answered here as HTTP 400
//     with code 400). Content with a URL not registered at q.qq.com
//     ("发动的消息内容包含 URL 的说明") fails: 40054010 "消息发送失败，不允许发送url",
//     the code public reports show; QQ's check catches bare domains too.
//   - rich media (https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/rich-media.html):
//     POST /v2/users/{openid}/files and /v2/groups/{group_openid}/files with
//     file_type (1 image png/jpg, 2 video mp4, 3 voice; 4 file is not open),
//     url required, srv_send_msg required (true would be a proactive push),
//     file_data "not yet supported" and so refused; the url is fetched, as
//     QQ's servers do, and a failed fetch is 304082 "upload media info
//     fail". A file_info works only in the kind of chat (user or group) it
//     was uploaded for. The doc names no code for a bad upload request; the
//     fake answers those with HTTP 400 and code 400.
//
// Every request is written to wire, normalized, for the golden tests.
type qqFake struct {
	t        *testing.T
	now      func() time.Time
	mu       sync.Mutex
	tokens   int
	valid    []string
	limitNxt int
	replies  map[string]int             // msg_id or event_id: replies taken
	seqs     map[string]map[float64]int // msg_id or event_id: msg_seq used
	received map[string]time.Time       // msg_id or event_id: when the user's message came (else the first reply)
	infos    map[string]string          // file_info: "users" or "groups"
	fetched  []string                   // what each upload's url served
	messages []map[string]any
	paths    []string
	wire     strings.Builder
	public   string // the link server's URL, normalized in wire
}

func newQQFake(t *testing.T) *qqFake {
	return &qqFake{t: t, now: time.Now, replies: map[string]int{}, seqs: map[string]map[float64]int{}, infos: map[string]string{}, received: map[string]time.Time{}}
}

var qqPath = regexp.MustCompile(`^/v2/(users|groups)/([^/]+)/(files|messages)$`)

func (f *qqFake) handler(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	f.record(r, body)
	if r.URL.Path == "/app/getAppAccessToken" {
		f.token(w, body)
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "QQBot ")
	if !ok || !slices.Contains(f.valid, tok) || r.Header.Get("X-Union-Appid") != "1020" {
		writeJSON(w, 401, map[string]any{"code": 11244, "message": "token not exist or expire"})
		return
	}
	if f.limitNxt > 0 {
		f.limitNxt--
		w.Header().Set("Retry-After", "3")
		writeJSON(w, 429, map[string]any{"code": 22009, "message": "msg limit exceed"})
		return
	}
	f.paths = append(f.paths, r.URL.Path)
	m := qqPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		writeJSON(w, 404, map[string]any{"code": 404, "message": "not found"})
		return
	}
	if strings.Contains(m[2], "NOTMEMBER") {
		writeJSON(w, 403, map[string]any{"code": 304003, "message": "bot not in group"})
		return
	}
	var b map[string]any
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || json.Unmarshal(body, &b) != nil {
		writeJSON(w, 400, map[string]any{"code": 400, "message": "body is not JSON"})
		return
	}
	if m[3] == "files" {
		f.upload(w, m[1], b)
		return
	}
	f.message(w, m[1], b)
}

func (f *qqFake) token(w http.ResponseWriter, body []byte) {
	var b map[string]string
	if json.Unmarshal(body, &b) != nil || b["appId"] != "1020" || b["clientSecret"] != "qq-secret-123" {
		writeJSON(w, 200, map[string]any{"code": 100016, "message": "invalid appid or secret"})
		return
	}
	f.tokens++
	tok := fmt.Sprintf("qq-tok-%d", f.tokens)
	f.valid = append(f.valid, tok)
	writeJSON(w, 200, map[string]any{"access_token": tok, "expires_in": "7200"})
}

// refuse answers a request the doc does not allow.
func refuse(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, map[string]any{"code": code, "message": msg})
}

func (f *qqFake) upload(w http.ResponseWriter, scene string, b map[string]any) {
	for k := range b {
		if !slices.Contains([]string{"file_type", "url", "srv_send_msg", "file_data"}, k) {
			refuse(w, 400, 400, "unknown field "+k)
			return
		}
	}
	ft, _ := b["file_type"].(float64)
	u, _ := b["url"].(string)
	srv, isBool := b["srv_send_msg"].(bool)
	_, data := b["file_data"]
	switch {
	case ft == 4:
		refuse(w, 400, 400, "file_type 4 (file) is not open")
		return
	case ft != 1 && ft != 2 && ft != 3:
		refuse(w, 400, 400, "file_type must be 1, 2 or 3")
		return
	case data:
		refuse(w, 400, 400, "file_data is not supported yet; give url")
		return
	case u == "":
		refuse(w, 400, 400, "url is required")
		return
	case !isBool:
		refuse(w, 400, 400, "srv_send_msg is required")
		return
	case srv:
		refuse(w, 403, 40034102, "主动消息失败, 无权限")
		return
	}
	got, err := qqFetch(u, int(ft))
	if err != nil {
		f.t.Logf("fake QQ: fetching %s: %v", u, err)
		refuse(w, 400, 304082, "upload media info fail")
		return
	}
	f.fetched = append(f.fetched, got)
	fmt.Fprintf(&f.wire, "  (QQ fetched the url: %s)\n", got)
	info := fmt.Sprintf("info-%d", len(f.infos)+1)
	f.infos[info] = scene
	writeJSON(w, 200, map[string]any{"file_uuid": "uuid-" + info, "file_info": info, "ttl": 3600})
}

// qqFetch gets a url as QQ's servers would (no Origin, no key) and checks
// that it serves a file of the type the upload says: image/png or
// image/jpeg for 1, video/mp4 for 2.
func qqFetch(u string, fileType int) (string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 21<<20))
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if want := map[int][]string{1: {"image/png", "image/jpeg"}, 2: {"video/mp4"}}[fileType]; want != nil && !slices.Contains(want, ct) {
		return "", fmt.Errorf("Content-Type %q for file_type %d", ct, fileType)
	}
	return fmt.Sprintf("%s %q", ct, data), nil
}

var qqMessageFields = []string{"content", "msg_type", "markdown", "keyboard", "ark", "media", "message_reference", "event_id", "msg_id", "msg_seq"}

func (f *qqFake) message(w http.ResponseWriter, scene string, b map[string]any) {
	for k := range b {
		if !slices.Contains(qqMessageFields, k) {
			refuse(w, 400, 400, "unknown field "+k)
			return
		}
	}
	mt, ok := b["msg_type"].(float64)
	content, hasContent := b["content"].(string)
	msgID, _ := b["msg_id"].(string)
	eventID, _ := b["event_id"].(string)
	switch {
	case !ok:
		refuse(w, 400, 400, "msg_type is required")
		return
	case scene == "groups" && !hasContent, mt == 7 && content == "":
		refuse(w, 400, 400, "content is required")
		return
	case msgID == "" && eventID == "":
		refuse(w, 403, 40034102, "主动消息失败, 无权限")
		return
	}
	if mt == 7 {
		media, _ := b["media"].(map[string]any)
		info, _ := media["file_info"].(string)
		if f.infos[info] != scene {
			refuse(w, 400, 400, "media.file_info is not one uploaded for this kind of chat")
			return
		}
	}
	if qqFakeURL.MatchString(content) {
		refuse(w, 400, 40054010, "消息发送失败，不允许发送url")
		return
	}
	ref := msgID
	if ref == "" {
		ref = "event:" + eventID
	}
	if !f.inWindow(ref, scene) {
		refuse(w, 400, 400, "回复消息msg_id已过期")
		return
	}
	seq := 1.0
	if s, ok := b["msg_seq"].(float64); ok {
		seq = s
	}
	if f.seqs[ref] == nil {
		f.seqs[ref] = map[float64]int{}
	}
	if f.seqs[ref][seq] > 0 {
		refuse(w, 400, 40054005, "消息被去重，请检查请求msgseq")
		return
	}
	f.seqs[ref][seq]++
	if f.replies[ref] >= 5 {
		refuse(w, 400, 22009, "msg limit exceed")
		return
	}
	f.replies[ref]++
	delete(b, "msg_seq")
	f.messages = append(f.messages, b)
	writeJSON(w, 200, map[string]any{"id": fmt.Sprintf("out-%d", len(f.messages)), "timestamp": 1767322800})
}

// qqFakeURL is what QQ's content check catches: a scheme, www., or a
// bare domain.
var qqFakeURL = regexp.MustCompile(`(?i)[a-z]+://|www\.|[a-z0-9-]+\.(com|cn|net|org)\b`)

// inWindow reports whether a reply to ref is within QQ's reply window:
// 5 minutes of the user's message in a group, 60 in a one-to-one chat.
// A message the test did not date is taken as received at its first reply.
func (f *qqFake) inWindow(ref, scene string) bool {
	at, ok := f.received[ref]
	if !ok {
		at = f.now()
		f.received[ref] = at
	}
	window := 60 * time.Minute
	if scene == "groups" {
		window = 5 * time.Minute
	}
	return f.now().Sub(at) < window
}

var linkToken = regexp.MustCompile(`/media/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`)

// record writes one request as the golden file shows it: method, path,
// the headers that matter, and the JSON body with sorted keys; a link's
// token, the link server's address and file_data's base64 are normalized.
func (f *qqFake) record(r *http.Request, body []byte) {
	fmt.Fprintf(&f.wire, "%s %s\n", r.Method, r.URL.Path)
	for _, h := range []string{"Authorization", "Content-Type", "User-Agent", "X-Union-Appid"} {
		if v := r.Header.Get(h); v != "" {
			fmt.Fprintf(&f.wire, "%s: %s\n", h, v)
		}
	}
	var b map[string]any
	if json.Unmarshal(body, &b) != nil {
		fmt.Fprintf(&f.wire, "%q\n", body)
		return
	}
	if d, ok := b["file_data"].(string); ok {
		raw, err := base64.StdEncoding.DecodeString(d)
		b["file_data"] = fmt.Sprintf("<base64 of %q, %v>", raw, err)
	}
	if s, ok := b["clientSecret"].(string); ok {
		b["clientSecret"] = strings.Repeat("*", len(s))
	}
	if u, ok := b["url"].(string); ok && f.public != "" {
		b["url"] = linkToken.ReplaceAllString(strings.Replace(u, f.public, "<public URL>", 1), "/media/<token>")
	}
	enc := json.NewEncoder(&f.wire)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(b)
}

// qqSetup is a QQ sender against the fake, with media links over a
// workspace folder served by a loopback server, as TOOLSVC_PUBLIC_URL
// would serve them.
type qqSetup struct {
	fake  *qqFake
	qq    *QQ
	clk   *clock
	dir   string
	links *medialink.Links
}

func newQQSetup(t *testing.T, withLinks bool) *qqSetup {
	t.Helper()
	s := &qqSetup{fake: newQQFake(t), clk: newClock(), dir: t.TempDir()}
	s.fake.now = s.clk.Now
	srv := fake(t, s.fake.handler)
	o := testOptions(s.clk)
	if withLinks {
		ws, err := workspace.Open(s.dir, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		pub := fake(t, func(w http.ResponseWriter, r *http.Request) {
			lf, err := s.links.Open(strings.TrimPrefix(r.URL.Path, "/media/"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			defer lf.Close()
			w.Header().Set("Content-Type", lf.ContentType)
			_, _ = io.Copy(w, lf)
		})
		s.links, err = medialink.New(ws, medialink.Options{PublicURL: pub.URL, Now: s.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		s.fake.public = pub.URL
		o.Links = s.links
	}
	s.qq = NewQQ(QQAccount{AppID: "1020", AppSecret: "qq-secret-123", BaseURL: srv.URL, TokenURL: srv.URL + "/app/getAppAccessToken"}, o)
	seq := int64(0)
	s.qq.replies.firstSeq = func() int64 { seq += 1000; return seq }
	return s
}

// file writes name into the workspace and returns it as send_media hands
// it over: open, with its workspace path.
func (s *qqSetup) file(t *testing.T, name, data string) *File {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	fl, ok := NewFile(name, int64(len(data)), bytes.NewReader([]byte(data)))
	if !ok {
		t.Fatalf("%s: type not accepted", name)
	}
	fl.Path = name
	return fl
}

// wire returns the requests recorded since the last call.
func (s *qqSetup) wire() string {
	s.fake.mu.Lock()
	defer s.fake.mu.Unlock()
	out := s.fake.wire.String()
	s.fake.wire.Reset()
	return out
}

func outcomeText(out Outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "caption: %v\n", out.Caption)
	for i, err := range out.Files {
		fmt.Fprintf(&b, "file %d: %v\n", i, err)
	}
	return b.String()
}

// TestQQGolden records QQ's exact requests for each case: passive replies
// with msg_id from X-Reply-To and a fresh msg_seq each, the caption with
// the first file, files by url, at most 5 messages per user message
// (across calls), event IDs, no request at all without X-Reply-To, and
// the file_data fallback that the documented API refuses.
func TestQQGolden(t *testing.T) {
	ctx := context.Background()
	var g strings.Builder
	section := func(title string, out Outcome, wire string) {
		fmt.Fprintf(&g, "=== %s\n%s--- outcome\n%s\n", title, wire, outcomeText(out))
	}

	s := newQQSetup(t, true)
	var files []*File
	for i, name := range []string{"a.png", "b.jpg", "c.mp4", "d.png", "e.jpeg", "f.png"} {
		files = append(files, s.file(t, name, fmt.Sprintf("bytes-%d", i)))
	}
	out := s.qq.Send(ctx, &Message{Target: Target{ChatID: "GROUPOPENID"}, ReplyTo: "ROBOT1.0_in-1", Caption: "Q3 charts", Files: files})
	section("group: a caption and 6 files in reply to one message: 5 messages, the caption with the first", out, s.wire())

	out = s.qq.Send(ctx, &Message{Target: Target{ChatID: "GROUPOPENID"}, ReplyTo: "ROBOT1.0_in-1", Files: files[:1]})
	section("group: a second call for the same message: its 5 replies are used up, nothing is requested", out, s.wire())

	out = s.qq.Send(ctx, &Message{Target: Target{ChatID: "user:USEROPENID"}, ReplyTo: "event:C2C_MSG_RECEIVE:ev-9", Caption: "hi", Files: files[2:3]})
	section("one-to-one: a reply to an event (X-Reply-To event:<id>)", out, s.wire())

	out = s.qq.Send(ctx, &Message{Target: Target{ChatID: "GROUPOPENID"}, Caption: "proactive", Files: files[:2]})
	section("no X-Reply-To: refused before any request", out, s.wire())

	nl := newQQSetup(t, false)
	out = nl.qq.Send(ctx, &Message{Target: Target{ChatID: "GROUPOPENID"}, ReplyTo: "ROBOT1.0_in-2", Caption: "x", Files: []*File{nl.file(t, "a.png", "png-bytes")}})
	section("no TOOLSVC_PUBLIC_URL: the file goes as file_data, which the documented API refuses", out, nl.wire())

	golden(t, "qq", g.String())

	// What the golden file shows, asserted: msg_id on every message, at
	// most 5 of them, and the files QQ fetched are the workspace's.
	s.fake.mu.Lock()
	defer s.fake.mu.Unlock()
	if n := len(s.fake.messages); n != 6 {
		t.Errorf("%d messages, want 5 to the group and 1 to the user", n)
	}
	for _, m := range s.fake.messages[:5] {
		if m["msg_id"] != "ROBOT1.0_in-1" {
			t.Errorf("message without the msg_id of X-Reply-To: %v", m)
		}
	}
	if got := s.fake.fetched[0]; got != `image/png "bytes-0"` {
		t.Errorf("QQ fetched %s", got)
	}
}

func TestQQ(t *testing.T) {
	s := newQQSetup(t, true)
	qf, qq, clk := s.fake, s.qq, s.clk
	ctx := context.Background()
	png := s.file(t, "a.png", "png-bytes")
	reply := func(chat, id string, files ...*File) *Message {
		return &Message{Target: Target{ChatID: chat}, ReplyTo: id, Files: files}
	}

	t.Run("one-to-one", func(t *testing.T) {
		mustSend(t, qq.Send(ctx, reply("user:USEROPENID", "m-1", png)))
		if got := qf.paths[len(qf.paths)-2:]; !slices.Equal(got, []string{"/v2/users/USEROPENID/files", "/v2/users/USEROPENID/messages"}) {
			t.Errorf("paths %v", got)
		}
	})
	t.Run("msg_seq clear of the agent's own replies", func(t *testing.T) {
		// The agent replied to m-2 itself with msg_seq 1 and 2.
		qf.mu.Lock()
		qf.seqs["m-2"] = map[float64]int{1: 1, 2: 1}
		qf.replies["m-2"] = 2
		qf.mu.Unlock()
		qq.replies.firstSeq = randomSeq
		mustSend(t, qq.Send(ctx, reply("G", "m-2", png, png, png)))
		out := qq.Send(ctx, reply("G", "m-2", png))
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "code 22009") || !strings.Contains(out.Files[0].Error(), "Next: send the rest after the user's next message") {
			t.Errorf("a sixth reply in all: %v, want QQ's refusal with what to do", out.Files[0])
		}
	})
	t.Run("token refreshed after expiry", func(t *testing.T) {
		clk.Advance(7200 * time.Second)
		mustSend(t, qq.Send(ctx, &Message{Target: Target{ChatID: "G"}, ReplyTo: "m-3", Caption: "x"}))
		if qf.tokens != 2 {
			t.Errorf("tokens %d, want 2", qf.tokens)
		}
	})
	t.Run("401 fetches a new token", func(t *testing.T) {
		qf.mu.Lock()
		qf.valid = nil
		qf.mu.Unlock()
		mustSend(t, qq.Send(ctx, &Message{Target: Target{ChatID: "G"}, ReplyTo: "m-4", Caption: "x"}))
		if qf.tokens != 3 {
			t.Errorf("tokens %d, want 3", qf.tokens)
		}
	})
	t.Run("429 then success", func(t *testing.T) {
		qf.mu.Lock()
		qf.limitNxt = 2
		qf.mu.Unlock()
		n := len(clk.Sleeps())
		mustSend(t, qq.Send(ctx, reply("G", "m-5", png)))
		if s := clk.Sleeps()[n:]; !slices.Equal(s, []time.Duration{3 * time.Second, 3 * time.Second}) {
			t.Errorf("waits %v", s)
		}
	})
	t.Run("types", func(t *testing.T) {
		for name, want := range map[string]string{"r.pdf": "only png and jpg images and mp4", "g.gif": "only png and jpg", "a.png": "", "v.mp4": ""} {
			if r := qq.Check(memFile(t, name, []byte("x"))); (want == "" && r != "") || !strings.Contains(r, want) {
				t.Errorf("%s: %q, want %q", name, r, want)
			}
		}
		if r := qq.Check(&File{Name: "b.jpg", Ext: "jpg", Kind: Image, Size: 11 << 20}); !strings.Contains(r, "10 MB") {
			t.Errorf("11 MB jpg: %q", r)
		}
	})
	t.Run("API error reported", func(t *testing.T) {
		out := qq.Send(ctx, reply("NOTMEMBER", "m-6", png))
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "bot not in group") {
			t.Errorf("got %v, want the API's refusal", out.Files[0])
		}
	})
	t.Run("a file without a workspace path goes as file_data", func(t *testing.T) {
		out := qq.Send(ctx, reply("G", "m-7", memFile(t, "mem.png", []byte("x"))))
		if out.Files[0] == nil || !strings.Contains(out.Files[0].Error(), "TOOLSVC_PUBLIC_URL") {
			t.Errorf("got %v, want the file_data refusal naming TOOLSVC_PUBLIC_URL", out.Files[0])
		}
	})
}

// TestQQFakeEnforcesTheDoc sends the fake what today's fakes accepted and
// QQ refuses: each is refused with the documented answer.
func TestQQFakeEnforcesTheDoc(t *testing.T) {
	qf := newQQFake(t)
	qf.valid = []string{"tok"}
	srv := fake(t, qf.handler)
	post := func(path string, body map[string]any) string {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "QQBot tok")
		req.Header.Set("X-Union-Appid", "1020")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Code int `json:"code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Sprintf("%d/%d", resp.StatusCode, e.Code)
	}
	qf.infos["info-x"] = "groups"
	cases := []struct {
		name, path string
		body       map[string]any
		want       string
	}{
		{"proactive message", "/v2/groups/G/messages", map[string]any{"msg_type": 0, "content": "hi"}, "403/40034102"},
		{"media without content", "/v2/groups/G/messages", map[string]any{"msg_type": 7, "content": "", "media": map[string]any{"file_info": "info-x"}, "msg_id": "m"}, "400/400"},
		{"group file_info in a one-to-one chat", "/v2/users/U/messages", map[string]any{"msg_type": 7, "content": " ", "media": map[string]any{"file_info": "info-x"}, "msg_id": "m"}, "400/400"},
		{"first reply", "/v2/groups/G/messages", map[string]any{"msg_type": 0, "content": "1", "msg_id": "m"}, "200/0"},
		{"msg_seq 1 again (the default)", "/v2/groups/G/messages", map[string]any{"msg_type": 0, "content": "2", "msg_id": "m", "msg_seq": 1}, "400/40054005"},
		{"upload with file_data", "/v2/groups/G/files", map[string]any{"file_type": 1, "file_data": "eA==", "srv_send_msg": false}, "400/400"},
		{"upload without url", "/v2/groups/G/files", map[string]any{"file_type": 1, "srv_send_msg": false}, "400/400"},
		{"upload sent at once", "/v2/groups/G/files", map[string]any{"file_type": 1, "url": "http://x/a.png", "srv_send_msg": true}, "403/40034102"},
		{"upload of a plain file", "/v2/groups/G/files", map[string]any{"file_type": 4, "url": "http://x/a.pdf", "srv_send_msg": false}, "400/400"},
		{"upload whose url does not serve", "/v2/groups/G/files", map[string]any{"file_type": 1, "url": "http://127.0.0.1:1/nothing.png", "srv_send_msg": false}, "400/304082"},
		{"unknown field", "/v2/groups/G/messages", map[string]any{"msg_type": 0, "content": "x", "msg_id": "m", "reply_to": "m"}, "400/400"},
	}
	for _, c := range cases {
		if got := post(c.path, c.body); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	for seq := 2; seq <= 5; seq++ {
		if got := post("/v2/groups/G/messages", map[string]any{"msg_type": 0, "content": "x", "msg_id": "m", "msg_seq": seq}); got != "200/0" {
			t.Errorf("reply %d: %s", seq, got)
		}
	}
	if got := post("/v2/groups/G/messages", map[string]any{"msg_type": 0, "content": "x", "msg_id": "m", "msg_seq": 6}); got != "400/22009" {
		t.Errorf("a sixth reply: %s, want 400/22009", got)
	}
}

// TestReplyBook: counts hold across calls, a group message's window
// closes after 5 minutes and a direct one's after 60, the count is
// forgotten after qqKeepBooked, a refused reply gives its slot back
// but not its msg_seq, and the book stays bounded.
func TestReplyBook(t *testing.T) {
	clk := newClock()
	b := &replyBook{now: clk.Now, firstSeq: func() int64 { return 1000 }, m: map[string]*booked{}}
	var seqs []int64
	for range qqMaxReplies {
		s, err := b.reserve("m", false)
		if err != nil {
			t.Fatalf("a reply within the limit was refused: %v", err)
		}
		seqs = append(seqs, s)
	}
	if _, err := b.reserve("m", false); err != errRepliesUsed {
		t.Errorf("a sixth reply: %v, want errRepliesUsed", err)
	}
	b.release("m")
	if s, err := b.reserve("m", false); err != nil || s != 1005 {
		t.Errorf("after a release: %d %v, want a fresh msg_seq 1005", s, err)
	}
	if !slices.Equal(seqs, []int64{1000, 1001, 1002, 1003, 1004}) {
		t.Errorf("msg_seq %v", seqs)
	}
	if _, err := b.reserve("g", true); err != nil {
		t.Fatal(err)
	}
	clk.Advance(qqWindowGroup)
	if err := b.check("g", true); err == nil || !strings.Contains(err.Error(), "5 minutes") {
		t.Errorf("a group message after 5 minutes: %v", err)
	}
	clk.Advance(qqWindowDirect - qqWindowGroup)
	if err := b.check("m", false); err == nil || !strings.Contains(err.Error(), "60 minutes") {
		t.Errorf("a direct message after 60 minutes: %v", err)
	}
	clk.Advance(qqKeepBooked - qqWindowDirect)
	if b.check("m", false) != nil || b.m["m"].sent != 0 {
		t.Error("the count was kept beyond qqKeepBooked")
	}
	for i := range qqMaxBooked + 10 {
		clk.Advance(time.Millisecond)
		_, _ = b.reserve(fmt.Sprint("id-", i), false)
	}
	if len(b.m) > qqMaxBooked {
		t.Errorf("%d messages booked, more than %d", len(b.m), qqMaxBooked)
	}
	if _, ok := b.m["id-0"]; ok {
		t.Error("the oldest message was kept over the bound")
	}
}

// TestQQEventReplySeq: every reply to an event carries a msg_seq of its
// own, so QQ does not take the second file for one event as a repeat of
// the first (it de-duplicates by event_id + msg_seq, msg_seq 1 when none
// is given).
// Doc: https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html
func TestQQEventReplySeq(t *testing.T) {
	s := newQQSetup(t, true)
	ctx := context.Background()
	a, b := s.file(t, "a.png", "png-a"), s.file(t, "b.png", "png-b")
	out := s.qq.Send(ctx, &Message{Target: Target{ChatID: "user:USEROPENID"}, ReplyTo: "event:FRIEND_ADD:ev-1", Caption: "two", Files: []*File{a, b}})
	mustSend(t, out)
	// A second call for the same event goes on with fresh numbers.
	mustSend(t, s.qq.Send(ctx, &Message{Target: Target{ChatID: "user:USEROPENID"}, ReplyTo: "event:FRIEND_ADD:ev-1", Files: []*File{a}}))
	s.fake.mu.Lock()
	defer s.fake.mu.Unlock()
	if n := s.fake.replies["event:FRIEND_ADD:ev-1"]; n != 3 {
		t.Errorf("QQ took %d replies to the event, want 3", n)
	}
	if seqs := s.fake.seqs["event:FRIEND_ADD:ev-1"]; len(seqs) != 3 || seqs[1] != 0 {
		t.Errorf("msg_seq used %v, want 3 distinct ones clear of the default 1", seqs)
	}
}

// TestQQReplyWindow: QQ takes replies within 5 minutes of a group message
// and 60 minutes of a one-to-one one. A call after the window closed (as
// measured from this service's first reply to the message, which is no
// earlier than the message itself) is refused before anything is
// uploaded, saying so and what to do.
// Doc: https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html
func TestQQReplyWindow(t *testing.T) {
	s := newQQSetup(t, true)
	ctx := context.Background()
	png := s.file(t, "a.png", "png-bytes")
	send := func(chat, ref string) Outcome {
		return s.qq.Send(ctx, &Message{Target: Target{ChatID: chat}, ReplyTo: ref, Caption: "here", Files: []*File{png}})
	}
	mustSend(t, send("GROUPOPENID", "g-1"))
	mustSend(t, send("user:USEROPENID", "u-1"))
	s.wire()

	s.clk.Advance(4 * time.Minute)
	mustSend(t, send("GROUPOPENID", "g-1"))
	s.clk.Advance(2 * time.Minute) // 6 minutes after the group message
	s.wire()
	out := send("GROUPOPENID", "g-1")
	for i, err := range append([]error{out.Caption}, out.Files...) {
		if err == nil || !strings.Contains(err.Error(), "5 minutes") || !strings.Contains(err.Error(), "Next:") {
			t.Errorf("part %d, 6 minutes after a group message: %v, want the 5-minute window and what to do", i, err)
		}
	}
	if w := s.wire(); w != "" {
		t.Errorf("requests after the window closed:\n%s", w)
	}

	mustSend(t, send("user:USEROPENID", "u-1")) // 6 minutes: a direct chat's window is open
	s.clk.Advance(55 * time.Minute)             // 61 minutes
	s.wire()
	out = send("user:USEROPENID", "u-1")
	if err := out.Files[0]; err == nil || !strings.Contains(err.Error(), "60 minutes") || !strings.Contains(err.Error(), "Next:") {
		t.Errorf("61 minutes after a direct message: %v, want the 60-minute window and what to do", err)
	}
	if w := s.wire(); w != "" {
		t.Errorf("requests after the window closed:\n%s", w)
	}
}

// TestQQCaptionWithURL: QQ refuses a message whose text holds a URL that
// is not registered at q.qq.com (40054010), bare domains included. Such a
// caption is refused before any upload, with QQ's rule and what to do, so
// no reply slot is spent on a message that cannot go.
// Doc: https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html
func TestQQCaptionWithURL(t *testing.T) {
	s := newQQSetup(t, true)
	ctx := context.Background()
	png := s.file(t, "a.png", "png-bytes")
	for i, caption := range []string{"see https://example.com/q3", "mirror: www.example.org", "on github.com/countbot/toolsvc"} {
		ref := fmt.Sprint("m-url-", i)
		out := s.qq.Send(ctx, &Message{Target: Target{ChatID: "GROUPOPENID"}, ReplyTo: ref, Caption: caption, Files: []*File{png}})
		for j, err := range append([]error{out.Caption}, out.Files...) {
			if err == nil || !strings.Contains(err.Error(), "URL") || !strings.Contains(err.Error(), "q.qq.com") || !strings.Contains(err.Error(), "Next:") {
				t.Errorf("%q, part %d: %v, want QQ's URL rule and what to do", caption, j, err)
			}
		}
		if w := s.wire(); w != "" {
			t.Errorf("%q: requests made:\n%s", caption, w)
		}
	}
	// Words with dots that are no address still go.
	mustSend(t, s.qq.Send(ctx, &Message{Target: Target{ChatID: "GROUPOPENID"}, ReplyTo: "m-ok", Caption: "report.pdf v1.2.3 main.go", Files: []*File{png}}))
}
