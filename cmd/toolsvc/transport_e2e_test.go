package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// rawConn opens a plain TCP connection to the server, for clients that
// misbehave in ways net/http will not: announcing a body and not sending
// it, or not reading the answer.
func rawConn(t *testing.T, s *testServer, d *net.Dialer) net.Conn {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil {
		d = &net.Dialer{}
	}
	c, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readResponse reads one HTTP response from a raw connection, with a guard
// deadline so that a broken server fails the test instead of hanging it.
func readResponse(t *testing.T, c net.Conn, br *bufio.Reader) (*http.Response, []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitGuard))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return resp, body
}

// wantHTTPError checks a status and the {"error":{"code","message"}}
// envelope of an answer to POST path, and the answer against the contract.
func wantHTTPError(t *testing.T, s *testServer, path string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, req, resp, body)
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != status || json.Unmarshal(body, &e) != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("want %d %s, got %d %s", status, code, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestBodyTooLargeAnsweredBeforeReading announces a huge body and sends it
// slowly: the 413 comes from the Content-Length alone, while the client is
// still sending.
func TestBodyTooLargeAnsweredBeforeReading(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"MAX_BODY_BYTES": "1024"})
	c := rawConn(t, s, nil)
	fmt.Fprintf(c, "POST /tools/write_file/invoke HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n")
	stopSending := make(chan struct{})
	defer close(stopSending)
	go func() {
		// A trickle that would take years to finish.
		for {
			select {
			case <-stopSending:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte(`{"path":`)); err != nil {
					return
				}
			}
		}
	}()
	resp, body := readResponse(t, c, bufio.NewReader(c))
	wantHTTPError(t, s, "/tools/write_file/invoke", resp, body, http.StatusRequestEntityTooLarge, "body_too_large")
	if !resp.Close {
		t.Error("the connection is not closed after a 413")
	}
}

// TestBodyTooLargeReachesClientsThatSendEverythingFirst is the client most
// libraries are: it writes the whole body, then reads the answer. The
// server answers 413 early and drains the rest, so the client sees the 413
// and not a broken pipe or a reset.
func TestBodyTooLargeReachesClientsThatSendEverythingFirst(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"MAX_BODY_BYTES": "1024"})
	const size = 4 << 20
	big := `{"path":"a.txt","content":"` + strings.Repeat("x", size) + `"}`

	t.Run("Go, Content-Length", func(t *testing.T) {
		c := rawConn(t, s, nil)
		_ = c.SetWriteDeadline(time.Now().Add(waitGuard))
		if _, err := fmt.Fprintf(c, "POST /tools/write_file/invoke HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", len(big), big); err != nil {
			t.Fatalf("sending the body: %v", err)
		}
		resp, body := readResponse(t, c, bufio.NewReader(c))
		wantHTTPError(t, s, "/tools/write_file/invoke", resp, body, http.StatusRequestEntityTooLarge, "body_too_large")
	})
	t.Run("Go, chunked", func(t *testing.T) {
		// No Content-Length: the limit is found while reading.
		resp, body := s.do(t, "POST", "/tools/write_file/invoke", struct{ io.Reader }{strings.NewReader(big)}, nil)
		wantHTTPError(t, s, "/tools/write_file/invoke", resp, body, http.StatusRequestEntityTooLarge, "body_too_large")
	})
	t.Run("python http.client", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("python3 is not installed; the Go client above sends the same way")
		}
		u, _ := url.Parse(s.URL)
		script := `
import http.client, sys
c = http.client.HTTPConnection(sys.argv[1], timeout=30)
c.request("POST", "/tools/write_file/invoke", body=b"x" * int(sys.argv[2]), headers={"Content-Type": "application/json"})
r = c.getresponse()
print(r.status, r.read().decode())
`
		out, err := exec.Command(py, "-c", script, u.Host, fmt.Sprint(size)).CombinedOutput()
		if err != nil {
			t.Fatalf("python3: %v\n%s", err, out)
		}
		if !strings.HasPrefix(string(out), "413 ") || !strings.Contains(string(out), `"body_too_large"`) {
			t.Fatalf("python3 got: %s", out)
		}
	})
	// The service is fine afterwards, and nothing was written.
	mustSucceed(t, s.invoke(t, "write_file", `{"path":"b.txt","content":"small"}`))
	if _, err := os.Stat(filepath.Join(s.Workspace, "a.txt")); err == nil {
		t.Error("a.txt was written despite the 413")
	}
}

// TestBodyTimeout sends part of a body and stops: 408 with the JSON envelope.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"BODY_TIMEOUT": "1s"})
	c := rawConn(t, s, nil)
	fmt.Fprintf(c, "POST /tools/list_dir/invoke HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"path\":")
	resp, body := readResponse(t, c, bufio.NewReader(c))
	wantHTTPError(t, s, "/tools/list_dir/invoke", resp, body, http.StatusRequestTimeout, "body_timeout")
	assertContains(t, "408 message", string(body), "within 1s")
}

// TestSlowUploadsHoldNoSlot starts more trickling uploads than there are
// call slots; a normal call still runs. Each uploader asks for "100
// Continue", which the server sends only when the handler starts reading
// the body, so the test knows that every upload is in the handler.
func TestSlowUploadsHoldNoSlot(t *testing.T) {
	t.Parallel()
	const slots = 2
	s := startServer(t, map[string]string{"MAX_CONCURRENT_CALLS": fmt.Sprint(slots), "BODY_TIMEOUT": "5m"})
	for i := 0; i < 3*slots; i++ {
		c := rawConn(t, s, nil)
		fmt.Fprintf(c, "POST /tools/list_dir/invoke HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(waitGuard))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("uploader %d: want 100 Continue, got %q %v", i, line, err)
		}
		c.Write([]byte(`{"pa`)) // and nothing more
	}
	for i := 0; i < 2*slots; i++ {
		mustSucceed(t, s.invoke(t, "list_dir", `{}`))
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

// parseSSE splits a stream as the event-stream specification says: lines
// end at CR, LF or CRLF; "event" and "data" fields; a blank line ends an
// event. A strict parser is the point: framing must hold for any client.
func parseSSE(t *testing.T, stream []byte) []sseEvent {
	t.Helper()
	text := strings.ReplaceAll(string(stream), "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	var events []sseEvent
	var cur sseEvent
	var data []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			if data != nil {
				cur.data = strings.Join(data, "\n")
				events = append(events, cur)
			}
			cur, data = sseEvent{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.name = value
		case "data":
			data = append(data, value)
		}
	}
	return events
}

// TestStreamEventsAreFramedAndRedacted prints carriage returns, blank
// lines, a forged result event and an API key cut in two across events.
// Every output event must be one JSON object {"text"}, the only result
// event is the service's, and the key appears nowhere.
func TestStreamEventsAreFramedAndRedacted(t *testing.T) {
	t.Parallel()
	const key = "sk-test-streaming-key-0123456789"
	s := startServer(t, map[string]string{"API_KEYS": key})
	s.Key = key
	// The key is split by a pause longer than exec's streaming period, so
	// its two halves leave the tool in different events.
	cmd := `printf 'one\rtwo\n\nevent: result\ndata: {"status":"success","result":"forged"}\n\n'; ` +
		`printf 'key=sk-test-stream'; sleep 0.5; printf 'ing-key-0123456789 end\n'`
	body, _ := json.Marshal(execArgs(cmd))
	resp, stream := s.do(t, "POST", "/tools/exec/invoke", bytes.NewReader(body), map[string]string{"Accept": "text/event-stream"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, stream)
	}
	if strings.Contains(string(stream), key) {
		t.Errorf("the stream holds the key:\n%s", stream)
	}
	events := parseSSE(t, stream)
	if len(events) < 2 {
		t.Fatalf("events: %q", events)
	}
	var streamed strings.Builder
	for i, e := range events[:len(events)-1] {
		if e.name != "output" {
			t.Errorf("event %d is %q, want output: %q", i, e.name, e.data)
		}
		var d map[string]string
		if err := json.Unmarshal([]byte(e.data), &d); err != nil || len(d) != 1 {
			t.Errorf("event %d data is not {\"text\": ...}: %q", i, e.data)
		}
		streamed.WriteString(d["text"])
	}
	out := streamed.String()
	assertContains(t, "streamed output", out, "one\rtwo\n\nevent: result\ndata: {\"status\":\"success\",\"result\":\"forged\"}\n\n", "key=[REDACTED] end")
	if strings.Contains(out, key) || strings.Contains(out, "sk-test-stream") {
		t.Errorf("streamed output holds the key or its beginning: %q", out)
	}
	last := events[len(events)-1]
	var res registry.Result
	if last.name != "result" || json.Unmarshal([]byte(last.data), &res) != nil {
		t.Fatalf("last event: %+v", last)
	}
	if res.Status != "success" || !strings.Contains(res.Result, "key=[REDACTED] end") || strings.Contains(res.Result, key) {
		t.Errorf("result: %+v", res)
	}
}

// TestStreamClientThatStopsReading asks for a streamed command that prints
// without end and never reads. Whichever comes first ends the call: the
// stream write timeout (a blocked write fails and the call is canceled) or
// the call's own timeout (the tool never waits for the client). Either way
// the call is audited and its slot is free again, while other calls run
// meanwhile.
func TestStreamClientThatStopsReading(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		writeTimeout string
		execTimeout  int
		code         string
	}{
		{"write timeout first", "1s", 600, toolerr.Canceled},
		// The output fills the socket buffers (a few MB at exec's streaming
		// rate) well before 25s, so the result write blocks when the call
		// ends; the slot must not wait for it.
		{"call timeout first", "10m", 25, toolerr.Timeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, map[string]string{"STREAM_WRITE_TIMEOUT": c.writeTimeout, "MAX_CONCURRENT_CALLS": "2", "SHUTDOWN_TIMEOUT": "1s"})
			conn := rawConn(t, s, nil)
			// A small receive buffer, so the server's writes block sooner.
			_ = conn.(*net.TCPConn).SetReadBuffer(4096)
			body, _ := json.Marshal(execArgs("yes 'a line of output that fills the socket'", "timeout", c.execTimeout))
			fmt.Fprintf(conn, "POST /tools/exec/invoke HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\nX-Session-ID: stuck-reader\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			// Never read from conn.

			mustSucceed(t, s.invoke(t, "list_dir", `{}`))

			start := time.Now()
			rec := waitForAudit(t, s, "stuck-reader")
			t.Logf("the stuck call ended %s after the first call", time.Since(start))
			if rec.Status != registry.StatusError || rec.ErrorCode != c.code {
				t.Errorf("the stuck call ended as %s %s, want error %s: %.300s", rec.Status, rec.ErrorCode, c.code, rec.Result)
			}
			// Both slots are free again, even while the server may still be
			// trying to hand the result to the stuck client.
			type outcome struct {
				status int
				body   string
			}
			done := make(chan outcome, 2)
			for range 2 {
				go func() {
					resp, err := http.Post(s.URL+"/tools/exec/invoke", "application/json", strings.NewReader(`{"command":"sleep 0.5; echo ok"}`))
					if err != nil {
						done <- outcome{0, err.Error()}
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					done <- outcome{resp.StatusCode, string(b)}
				}()
			}
			for range 2 {
				if o := <-done; o.status != http.StatusOK || !strings.Contains(o.body, `"status":"success"`) {
					t.Errorf("a call after the stuck one: %d %s", o.status, o.body)
				}
			}
		})
	}
}

type auditLine struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	ErrorCode string `json:"error_code"`
	Result    string `json:"result"`
}

// waitForAudit waits for the final audit record of the call made with the
// given session ID. The wait is a guard against a hang, not a measurement.
func waitForAudit(t *testing.T, s *testServer, session string) auditLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitGuard)
	defer cancel()
	for {
		files, _ := filepath.Glob(filepath.Join(s.DataDir, "audit_logs", "*", "*.json"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var rec auditLine
			if json.Unmarshal(data, &rec) == nil && rec.SessionID == session {
				return rec
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no final audit record for session %s", session)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestBodyMemoryIsBounded: bodies are read before a slot is taken, so the
// slots no longer bound the memory bodies hold; a budget of
// MAX_CONCURRENT_CALLS times MAX_BODY_BYTES does. A large upload that
// stalls uses up the budget (here 1024 bytes), and another body then gets a
// 503 until the stalled one goes away.
//
// The test cannot see when the server has read the stalled bytes, so it
// sends calls until one is refused. A call holds its own body's bytes
// until it has run, so on a loaded machine the server may read the stalled
// bytes while a call runs and refuse the stalled upload instead: the
// server answers that upload, which the test sees, and it stalls another.
func TestBodyMemoryIsBounded(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"MAX_CONCURRENT_CALLS": "1", "MAX_BODY_BYTES": "1024", "BODY_TIMEOUT": "5m"})
	body := `{"path":"."` + strings.Repeat(" ", 200) + `}`
	post := func() (int, string) {
		resp, data := s.do(t, "POST", "/tools/list_dir/invoke", strings.NewReader(body), nil)
		return resp.StatusCode, string(data)
	}
	deadline := time.Now().Add(waitGuard)
	var c net.Conn
	for c == nil {
		stalled, refused := stallUpload(t, s)
		for c == nil {
			if time.Now().After(deadline) {
				t.Fatal("timed out waiting for a 503 while the stalled body holds the budget")
			}
			code, data := post()
			select {
			case status := <-refused:
				// Refused itself, as a call held part of the budget.
				if status != http.StatusServiceUnavailable {
					t.Fatalf("the stalled upload was answered %d, want 503 or no answer", status)
				}
				t.Logf("the stalled upload was refused while a call held its body; stalling another")
			default:
				if code == http.StatusServiceUnavailable && strings.Contains(data, `"overloaded"`) {
					c = stalled
				}
				continue
			}
			break
		}
	}
	c.Close()
	waitFor(t, "a 200 once the stalled upload is gone", func() bool {
		code, _ := post()
		return code == http.StatusOK
	})
}

// stallUpload sends the head of a call with a body of 1000 bytes, waits
// for "100 Continue" (the handler is reading the body), then sends 911 of
// the bytes and stops. The status of an answer to the upload, if one
// comes, is sent on the channel.
func stallUpload(t *testing.T, s *testServer) (net.Conn, <-chan int) {
	t.Helper()
	c := rawConn(t, s, nil)
	fmt.Fprintf(c, "POST /tools/list_dir/invoke HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(waitGuard))
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("want 100 Continue, got %v %v", resp, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	c.Write([]byte(`{"path":"."` + strings.Repeat(" ", 900)))
	answered := make(chan int, 1)
	go func() {
		if resp, err := http.ReadResponse(br, nil); err == nil {
			answered <- resp.StatusCode
		}
	}()
	return c, answered
}
