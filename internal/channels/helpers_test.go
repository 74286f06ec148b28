package channels

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// memFile is a file held in memory.
func memFile(t *testing.T, name string, data []byte) *File {
	t.Helper()
	f, ok := NewFile(name, int64(len(data)), bytes.NewReader(data))
	if !ok {
		t.Fatalf("%s: type not accepted", name)
	}
	return f
}

// clock is a settable time with a record of the waits asked of Sleep.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep records the wait and lets the clock run by it, without waiting.
func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

func testOptions(c *clock) Options {
	return Options{Client: &http.Client{Timeout: 10 * time.Second}, Now: c.Now, Sleep: c.Sleep, Version: "v1.2.3"}
}

// fake is a loopback API whose handler records failures on t; handlers
// answer with a status and a JSON body.
func fake(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// formData is a multipart request read whole: values and files by field.
type formData struct {
	Values    map[string]string
	Files     map[string][]byte
	Filenames map[string]string
	Headers   map[string]string // each file part's Content-Disposition
}

// readForm parses a multipart body, failing t when the request is not
// multipart or carries no exact Content-Length.
func readForm(t *testing.T, r *http.Request) formData {
	t.Helper()
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		t.Errorf("%s: Content-Type %q, want multipart/form-data", r.URL.Path, r.Header.Get("Content-Type"))
		return formData{}
	}
	body, _ := io.ReadAll(r.Body)
	if r.ContentLength != int64(len(body)) {
		t.Errorf("%s: Content-Length %d, body %d bytes", r.URL.Path, r.ContentLength, len(body))
	}
	fd := formData{Values: map[string]string{}, Files: map[string][]byte{}, Filenames: map[string]string{}, Headers: map[string]string{}}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("%s: bad multipart body: %v", r.URL.Path, err)
			return fd
		}
		data, _ := io.ReadAll(p)
		if p.FileName() != "" {
			fd.Files[p.FormName()] = data
			fd.Filenames[p.FormName()] = p.FileName()
			fd.Headers[p.FormName()] = p.Header.Get("Content-Disposition")
		} else {
			fd.Values[p.FormName()] = string(data)
		}
	}
	return fd
}

// readJSON decodes a JSON request body into v, failing t otherwise.
func readJSON(t *testing.T, r *http.Request, v any) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", r.URL.Path, ct)
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		t.Errorf("%s: body is not JSON: %v", r.URL.Path, err)
	}
}

// mustSend fails t unless every part of the outcome is nil.
func mustSend(t *testing.T, out Outcome) {
	t.Helper()
	if out.Caption != nil {
		t.Errorf("caption: %v", out.Caption)
	}
	for i, err := range out.Files {
		if err != nil {
			t.Errorf("file %d: %v", i, err)
		}
	}
}

// pngData is a real PNG of w x h pixels (one grey level: it compresses to
// little), so that fakes can read its dimensions as the platforms do.
func pngData(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// mp4Data is the smallest MP4 whose movie header gives a duration: an
// ftyp box and a moov box holding a version 0 mvhd (timescale 1000).
func mp4Data(seconds uint32) []byte {
	box := func(typ string, payload []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(8+len(payload)))
		return append(append(b, typ...), payload...)
	}
	mvhd := make([]byte, 100)
	binary.BigEndian.PutUint32(mvhd[12:], 1000)
	binary.BigEndian.PutUint32(mvhd[16:], seconds*1000)
	ftyp := box("ftyp", []byte("isom\x00\x00\x02\x00isomiso2mp41"))
	return append(ftyp, box("moov", box("mvhd", mvhd))...)
}

// toolsvcUA is the User-Agent every channel but Discord must send.
var toolsvcUA = regexp.MustCompile(`^toolsvc/[^ ]+ \(\+https://github\.com/countbot/toolsvc\)$`)

// checkUA fails t unless r names toolsvc and its version.
func checkUA(t *testing.T, r *http.Request) {
	t.Helper()
	if ua := r.Header.Get("User-Agent"); !toolsvcUA.MatchString(ua) {
		t.Errorf("%s: User-Agent %q, want toolsvc/<version> (+https://github.com/countbot/toolsvc)", r.URL.Path, ua)
	}
}
