package channels

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
)

// part is one field of a multipart form: a value, or a file.
type part struct {
	Name     string
	Value    string
	File     *File
	Filename string // the file's name in the form; default File.Name
	// Header adds parameters to the part's Content-Disposition (WeCom's
	// filelength).
	Disposition string
}

// form is a multipart body streamed from the files, never held whole in
// memory; its length is known in advance, so the request carries a
// Content-Length (some APIs refuse chunked uploads).
type form struct {
	parts    []part
	boundary string
}

func newForm(parts ...part) *form {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return &form{parts: parts, boundary: "toolsvc-" + hex.EncodeToString(b)}
}

func (f *form) contentType() string { return "multipart/form-data; boundary=" + f.boundary }

// write writes the form to w. With files false, each file's content is
// left out, so that the bytes written plus the files' sizes are the length.
func (f *form) write(w io.Writer, files bool) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(f.boundary); err != nil {
		return err
	}
	for _, p := range f.parts {
		h := make(textproto.MIMEHeader)
		if p.File == nil {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"`, escapeQuotes(p.Name)))
			pw, err := mw.CreatePart(h)
			if err != nil {
				return err
			}
			if _, err := io.WriteString(pw, p.Value); err != nil {
				return err
			}
			continue
		}
		name := p.Filename
		if name == "" {
			name = p.File.Name
		}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"%s`, escapeQuotes(p.Name), escapeQuotes(name), p.Disposition))
		h.Set("Content-Type", p.File.contentType())
		pw, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		if files {
			n, err := io.Copy(pw, p.File.reader())
			if err != nil {
				return err
			}
			if n != p.File.Size {
				return fmt.Errorf("%s changed size while it was being sent (%d bytes, not %d)", p.File.Name, n, p.File.Size)
			}
		}
	}
	return mw.Close()
}

func (f *form) length() (int64, error) {
	var c countWriter
	if err := f.write(&c, false); err != nil {
		return 0, err
	}
	n := int64(c)
	for _, p := range f.parts {
		if p.File != nil {
			n += p.File.Size
		}
	}
	return n, nil
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// request builds a POST of the form to url, the body streamed through a
// pipe from the files as the connection takes it.
func (f *form) request(ctx context.Context, url string) (*http.Request, error) {
	n, err := f.length()
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(f.write(pw, true)) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	req.ContentLength = n
	req.Header.Set("Content-Type", f.contentType())
	// The pipe cannot be replayed; retries build a new request.
	req.GetBody = nil
	return req, nil
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"", "\r", "", "\n", "")

func escapeQuotes(s string) string { return quoteEscaper.Replace(s) }

// jsonRequest builds a request with a JSON body.
func jsonRequest(ctx context.Context, method, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	return req, nil
}
