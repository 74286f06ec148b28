package extract

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/gogs/chardet"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
)

// metaCharset finds a charset declared in a <meta> tag, in either HTML5
// (<meta charset=gbk>) or HTML4 (<meta http-equiv content="...; charset=gbk">)
// form.
var metaCharset = regexp.MustCompile(`(?i)<meta[^>]*?charset\s*=\s*["']?\s*([a-z0-9_:.\-]+)`)

// metaScanBytes is how far into a page a <meta> charset is looked for. The
// HTML standard's prescan stops at 1024 bytes, but real pages put scripts
// and styles first and declare the charset later; browsers cope, so do we.
const metaScanBytes = 8192

// Decode converts body to UTF-8. The charset comes from, in order: a byte
// order mark, the Content-Type header, a <meta> declaration (HTML only),
// valid UTF-8, and a statistical guess (GBK, Big5, Shift_JIS, EUC-KR,
// windows-1251... pages served without any declaration). It returns the
// decoded text and the charset's name.
func Decode(body []byte, contentType string, isHTML bool) ([]byte, string) {
	enc, name := detect(body, contentType, isHTML)
	if enc == nil || name == "utf-8" {
		return bytes.ToValidUTF8(stripBOM(body), []byte("\uFFFD")), "utf-8"
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return bytes.ToValidUTF8(body, []byte("\uFFFD")), "utf-8"
	}
	return out, name
}

func detect(body []byte, contentType string, isHTML bool) (encoding.Encoding, string) {
	// BOM and header: DetermineEncoding calls these certain.
	if e, name, certain := charset.DetermineEncoding(body, contentType); certain {
		return e, name
	}
	if isHTML {
		head := body
		if len(head) > metaScanBytes {
			head = head[:metaScanBytes]
		}
		if m := metaCharset.FindSubmatch(head); m != nil {
			if e, name := charset.Lookup(string(m[1])); e != nil {
				// A page that says UTF-16 in ASCII cannot be UTF-16 (the
				// HTML standard's rule).
				if strings.HasPrefix(name, "utf-16") {
					return unicode.UTF8, "utf-8"
				}
				return e, name
			}
		}
	}
	if utf8.Valid(body) {
		return unicode.UTF8, "utf-8"
	}
	sample := body
	if len(sample) > 64<<10 {
		sample = sample[:64<<10]
	}
	det := chardet.NewTextDetector()
	if isHTML {
		det = chardet.NewHtmlDetector()
	}
	if r, err := det.DetectBest(sample); err == nil && r.Confidence >= 30 {
		if e, name := charset.Lookup(r.Charset); e != nil {
			return e, name
		}
	}
	e, name := charset.Lookup("windows-1252")
	return e, name
}

func stripBOM(b []byte) []byte {
	return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
}
