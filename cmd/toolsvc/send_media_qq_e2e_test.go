package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// qqPublicHost is the public name TOOLSVC_PUBLIC_URL gives the service in
// these tests; the fake QQ reaches it by dialing the service's listener,
// as a reverse proxy would forward it, so its requests name this Host.
const qqPublicHost = "qq-public.example.test"

// qqE2E is a QQ bot API as its docs describe it, reduced to what these
// tests need (internal/channels has the full fake and the golden file):
// https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html
// (a message must name msg_id or event_id, 40034102 otherwise; msg_id +
// msg_seq once only; 5 replies a message) and
// https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/rich-media.html
// (url required, file_data not supported; QQ's servers fetch the url).
type qqE2E struct {
	t       *testing.T
	service atomic.Value // the service's address, for the fetches
	mu      sync.Mutex
	urls    []string          // each upload's url
	fetched map[string]string // url: what it served
	msgs    []map[string]any
	seqs    map[string]bool
	replies map[string]int
	reqs    int
}

// fetch gets a url as QQ's servers do: no key, no Origin, the public Host.
func (q *qqE2E) fetch(u string) (int, string, string) {
	c := &http.Client{Timeout: waitGuard, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, q.service.Load().(string))
	}}}
	resp, err := c.Get(u)
	if err != nil {
		q.t.Errorf("fetching %s: %v", u, err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func (q *qqE2E) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reqs++
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if r.URL.Path == "/app/getAppAccessToken" {
		answer(200, map[string]any{"access_token": "qq-e2e-token", "expires_in": "7200"})
		return
	}
	if r.Header.Get("Authorization") != "QQBot qq-e2e-token" {
		answer(401, map[string]any{"code": 11244, "message": "token not exist or expire"})
		return
	}
	var b map[string]any
	_ = json.NewDecoder(r.Body).Decode(&b)
	switch {
	case strings.HasSuffix(r.URL.Path, "/files"):
		u, _ := b["url"].(string)
		if _, data := b["file_data"]; data || u == "" {
			answer(400, map[string]any{"code": 400, "message": "url required; file_data is not supported yet"})
			return
		}
		q.urls = append(q.urls, u)
		status, ct, body := q.fetch(u)
		if status != 200 {
			answer(400, map[string]any{"code": 304082, "message": "upload media info fail"})
			return
		}
		q.fetched[u] = ct + " " + body
		answer(200, map[string]any{"file_uuid": "u", "file_info": fmt.Sprint("info-", len(q.urls)), "ttl": 3600})
	case strings.HasSuffix(r.URL.Path, "/messages"):
		id, _ := b["msg_id"].(string)
		seq := fmt.Sprint(id, "/", b["msg_seq"])
		switch {
		case id == "" && b["event_id"] == nil:
			answer(403, map[string]any{"code": 40034102, "message": "主动消息失败, 无权限"})
		case q.seqs[seq]:
			answer(400, map[string]any{"code": 40054005, "message": "消息被去重，请检查请求msgseq"})
		case q.replies[id] >= 5:
			answer(400, map[string]any{"code": 22009, "message": "msg limit exceed"})
		default:
			q.seqs[seq] = true
			q.replies[id]++
			q.msgs = append(q.msgs, b)
			answer(200, map[string]any{"id": "out", "timestamp": 1767322800})
		}
	default:
		answer(404, map[string]any{"code": 404, "message": "not found"})
	}
}

// TestSendMediaQQ sends to QQ through the service: passive replies to the
// message X-Reply-To names, each file fetched by QQ from its signed link at
// TOOLSVC_PUBLIC_URL, with the public name as Host; then tries the links
// as an attacker would.
func TestSendMediaQQ(t *testing.T) {
	t.Parallel()
	qq := &qqE2E{t: t, fetched: map[string]string{}, seqs: map[string]bool{}, replies: map[string]int{}}
	api := httptest.NewServer(qq)
	defer api.Close()
	s := startServer(t, map[string]string{
		"QQ_APP_ID": "1020", "QQ_APP_SECRET": "qq-e2e-secret-0123456789",
		"QQ_BASE_URL": api.URL, "QQ_TOKEN_URL": api.URL + "/app/getAppAccessToken",
		"PUBLIC_URL": "http://" + qqPublicHost,
	})
	qq.service.Store(strings.TrimPrefix(s.URL, "http://"))
	s.writeWS(t, "out/a.png", "png-A")
	s.writeWS(t, "out/b.jpg", "jpg-B")
	outside := filepath.Join(t.TempDir(), "secret.png")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.Workspace, "out", "link.png")); err != nil {
		t.Fatal(err)
	}
	chat := []string{"X-Channel", "qq", "X-Chat-ID", "GROUP1"}

	res := s.invoke(t, "send_media", map[string]any{"file_paths": []string{"out/a.png", "out/b.jpg", "out/link.png", "../x.png"}, "message": "charts"},
		append(chat, "X-Reply-To", "ROBOT1.0_m1")...)
	assertContains(t, "result", mustSucceed(t, res), "Sent 2 of 4 files to qq", "- out/a.png: sent", "- out/b.jpg: sent",
		"- out/link.png: refused", "- ../x.png: refused", "Message: sent")
	qq.mu.Lock()
	if len(qq.msgs) != 2 || qq.msgs[0]["msg_id"] != "ROBOT1.0_m1" || qq.msgs[0]["content"] != "charts" || qq.msgs[1]["msg_id"] != "ROBOT1.0_m1" {
		t.Errorf("messages %v", qq.msgs)
	}
	if len(qq.urls) != 2 {
		t.Fatalf("uploads %v", qq.urls)
	}
	urlA, urlB := qq.urls[0], qq.urls[1]
	if !strings.HasPrefix(urlA, "http://"+qqPublicHost+"/media/") || qq.fetched[urlA] != "image/png png-A" || qq.fetched[urlB] != "image/jpeg jpg-B" {
		t.Errorf("QQ fetched %q", qq.fetched)
	}
	qq.mu.Unlock()

	// Without X-Reply-To nothing goes out, and the model is told what to pass.
	qq.mu.Lock()
	before := qq.reqs
	qq.mu.Unlock()
	mustFail(t, s.invoke(t, "send_media", map[string]any{"file_paths": []string{"out/a.png"}}, chat...), "tool_error",
		"Nothing was sent", "proactive messages were withdrawn", "Next: pass the X-Reply-To header")
	qq.mu.Lock()
	if qq.reqs != before {
		t.Errorf("%d requests reached QQ for a send without X-Reply-To", qq.reqs-before)
	}
	qq.mu.Unlock()

	t.Run("links", func(t *testing.T) {
		tokA := strings.TrimPrefix(urlA, "http://"+qqPublicHost+"/media/")
		tokB := strings.TrimPrefix(urlB, "http://"+qqPublicHost+"/media/")
		payloadA, macA, _ := strings.Cut(tokA, ".")
		payloadB, _, _ := strings.Cut(tokB, ".")
		flipped := []byte(macA)
		flipped[0] ^= 1
		for name, path := range map[string]string{
			"B's payload with A's MAC": "/media/" + payloadB + "." + macA,
			"A's MAC changed":          "/media/" + payloadA + "." + string(flipped),
			"no MAC":                   "/media/" + payloadA,
			"a path":                   "/media/..%2f..%2fetc%2fpasswd",
		} {
			resp, body := s.do(t, "GET", path, nil, nil)
			if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "png") {
				t.Errorf("%s: %d %s, want 404 naming no file", name, resp.StatusCode, body)
			}
		}
		// The token is the credential: no key, any Host, but a browser
		// page of another origin is still refused.
		if status, _, body := qq.fetch(urlB); status != 200 || body != "jpg-B" {
			t.Errorf("B again: %d %q", status, body)
		}
		resp, _ := s.do(t, "GET", "/media/"+tokA, nil, map[string]string{"Origin": "https://evil.example"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a page of another origin: %d, want 403", resp.StatusCode)
		}
		// The public Host passes on /media/ only.
		req, _ := http.NewRequest("GET", s.URL+"/tools", nil)
		req.Host = qqPublicHost
		if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusForbidden {
			t.Errorf("GET /tools with the public Host: %v %v, want 403", r, err)
		} else {
			r.Body.Close()
		}
		// A file changed after its link was made is not served.
		s.writeWS(t, "out/a.png", "png-A, changed")
		future := time.Now().Add(time.Hour)
		if err := os.Chtimes(filepath.Join(s.Workspace, "out/a.png"), future, future); err != nil {
			t.Fatal(err)
		}
		if resp, body := s.do(t, "GET", "/media/"+tokA, nil, nil); resp.StatusCode != http.StatusGone {
			t.Errorf("changed file: %d %s, want 410", resp.StatusCode, body)
		}
	})

	t.Run("five replies a message", func(t *testing.T) {
		var paths []string
		for i := range 6 {
			paths = append(paths, s.writeWS(t, fmt.Sprintf("many/%d.png", i), fmt.Sprint("png-", i))[len(s.Workspace)+1:])
		}
		res := s.invoke(t, "send_media", map[string]any{"file_paths": paths, "message": "six"}, append(chat, "X-Reply-To", "ROBOT1.0_m2")...)
		assertContains(t, "result", mustSucceed(t, res), "Sent 5 of 6 files", "- many/5.png: failed: not sent: QQ takes at most 5 replies to one user message")
	})

	s.Stop(t)
	logs := s.Logs()
	assertContains(t, "logs", logs, "QQ fetches files from signed links", "media link served", `"path":"/media/[token]"`, "media link refused")
	for _, u := range []string{urlA, urlB} {
		if tok := u[strings.LastIndex(u, "/")+1:]; strings.Contains(logs, tok[:20]) {
			t.Errorf("the log holds a link's token")
		}
	}
}

// TestSendMediaQQWithoutPublicURL: start-up says files go as file_data,
// and a send that QQ refuses for it tells the model and names the setting.
func TestSendMediaQQWithoutPublicURL(t *testing.T) {
	t.Parallel()
	qq := &qqE2E{t: t, fetched: map[string]string{}, seqs: map[string]bool{}, replies: map[string]int{}}
	api := httptest.NewServer(qq)
	defer api.Close()
	s := startServer(t, map[string]string{
		"QQ_APP_ID": "1020", "QQ_APP_SECRET": "qq-e2e-secret-0123456789",
		"QQ_BASE_URL": api.URL, "QQ_TOKEN_URL": api.URL + "/app/getAppAccessToken",
	})
	s.writeWS(t, "a.png", "png")
	mustFail(t, s.invoke(t, "send_media", map[string]any{"file_paths": []string{"a.png"}}, "X-Channel", "qq", "X-Chat-ID", "G", "X-Reply-To", "ROBOT1.0_m1"),
		"tool_error", "upload as file_data", "TOOLSVC_PUBLIC_URL")
	if resp, _ := s.do(t, "GET", "/media/x.y", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/media/ without TOOLSVC_PUBLIC_URL: %d, want 404", resp.StatusCode)
	}
	assertContains(t, "logs", s.Logs(), "TOOLSVC_PUBLIC_URL is not set: files go to QQ as base64 file_data")
}
