// Package medialink makes one workspace file reachable, for a few minutes,
// at a public URL that needs no key: what a chat platform that fetches
// media by URL (QQ's rich-media upload) is given instead of the bytes.
//
// A link is TOOLSVC_PUBLIC_URL + "/media/" + a token. The token holds the
// file's path (and the key's own folder it lies in, when the key has one),
// its size and modification time, and the link's
// expiry, under an HMAC-SHA256 keyed with a secret drawn at random when
// the process starts: no one without the secret can make or change one,
// and every link dies with the process. A token names exactly one version
// of one file: the file is opened again through the workspace, or the
// key's folder (so no link or ".." leads out of it), must still be a regular file of the signed
// size and time, and is served read-only. Anything else is not found (a
// token that is not ours) or gone (expired, or the file changed).
package medialink

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/workspace"
)

// DefaultTTL is how long a link works: the platform fetches the file while
// the upload request waits, so minutes are plenty.
const DefaultTTL = 10 * time.Minute

// Route is the path under the public URL that serves the links; the token
// follows it.
const Route = "/media/"

// maxToken bounds the tokens Open looks at: a path of at most
// workspace.MaxPathLen bytes, the numbers and the MAC, in base64.
const maxToken = (workspace.MaxPathLen+100)*4/3 + 64

// version starts every signed payload, so that a later format cannot be
// mistaken for this one.
const version = "v2"

// Errors Open returns: ErrNotFound for a token that is not a link of this
// process (malformed, tampered with, signed with another secret), ErrGone
// for a genuine link that no longer serves (expired, the file changed or
// was removed).
var (
	ErrNotFound = errors.New("no such media link")
	ErrGone     = errors.New("the media link is no longer valid")
)

// Options configure New.
type Options struct {
	// PublicURL is the service's address as the platforms reach it
	// (https://bot.example.com, or with a path prefix a proxy strips).
	PublicURL string
	// TTL is how long a link works; 0: DefaultTTL.
	TTL time.Duration
	// Secret keys the MAC; nil: 32 random bytes. Tests set it.
	Secret []byte
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Links signs and opens media links of one workspace.
type Links struct {
	ws     *workspace.Workspace
	base   string
	ttl    time.Duration
	secret []byte
	now    func() time.Time
}

// New returns the links of ws at opts.PublicURL.
func New(ws *workspace.Workspace, opts Options) (*Links, error) {
	l := &Links{ws: ws, base: strings.TrimRight(opts.PublicURL, "/"), ttl: opts.TTL, secret: opts.Secret, now: opts.Now}
	if l.ttl <= 0 {
		l.ttl = DefaultTTL
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.secret == nil {
		l.secret = make([]byte, 32)
		if _, err := rand.Read(l.secret); err != nil {
			return nil, fmt.Errorf("media links: %w", err)
		}
	}
	return l, nil
}

// TTL is how long a link works.
func (l *Links) TTL() time.Duration { return l.ttl }

// URL returns a link to the file at name, a path as a model gives it, in
// the key's own folder (workspace.Folder; "": the whole workspace). A
// path outside it is refused whether or not the workspace is restricted,
// and so is anything but a regular file.
func (l *Links) URL(folder, name string) (string, error) {
	ws, err := l.ws.Folder(folder)
	if err != nil {
		return "", err
	}
	p, err := ws.Resolve(name)
	if err != nil {
		return "", err
	}
	if p.Outside {
		return "", fmt.Errorf("'%s' is outside the workspace: only workspace files get a media link", p.Display)
	}
	fi, err := p.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("'%s' is not a regular file", p.Display)
	}
	exp := l.now().Add(l.ttl).Unix()
	payload := strings.Join([]string{version, strconv.FormatInt(exp, 10), strconv.FormatInt(fi.Size(), 10),
		strconv.FormatInt(fi.ModTime().UnixNano(), 10), folder, p.Name}, "\n")
	return l.base + Route + l.token([]byte(payload)), nil
}

func (l *Links) token(payload []byte) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(l.mac(payload))
}

func (l *Links) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, l.secret)
	m.Write([]byte("toolsvc media link\x00"))
	m.Write(payload)
	return m.Sum(nil)
}

// File is an opened link: the file, read-only, and what a response says
// about it. The caller closes it.
type File struct {
	*os.File
	Name        string // the base name
	Display     string // the workspace path, for the log
	ContentType string // by the name's extension
	Size        int64
	ModTime     time.Time
}

// mediaTypes are the types of the media platforms fetch that not every
// system's MIME table knows.
var mediaTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
	".mp4": "video/mp4", ".mov": "video/quicktime", ".mp3": "audio/mpeg", ".amr": "audio/amr", ".silk": "audio/silk",
}

// contentType is name's MIME type by its extension; octet-stream when
// unknown.
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := mediaTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Open checks token and opens the file it names.
func (l *Links) Open(token string) (*File, error) {
	sig, err := l.verify(token)
	if err != nil {
		return nil, err
	}
	if l.now().Unix() > sig.exp {
		return nil, fmt.Errorf("%w: it expired at %s", ErrGone, time.Unix(sig.exp, 0).UTC().Format(time.RFC3339))
	}
	ws, err := l.ws.Folder(sig.folder)
	if err != nil {
		return nil, fmt.Errorf("%w: its folder is gone (%v)", ErrGone, err)
	}
	p, err := ws.Resolve(sig.name)
	if err != nil || p.Outside {
		return nil, fmt.Errorf("%w: its path is no longer in the workspace", ErrGone)
	}
	f, err := p.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: the file cannot be opened (%v)", ErrGone, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("%w: %v", ErrGone, err)
	case !fi.Mode().IsRegular() || fi.Size() != sig.size || fi.ModTime().UnixNano() != sig.mtime:
		f.Close()
		return nil, fmt.Errorf("%w: the file changed since the link was made", ErrGone)
	}
	return &File{File: f, Name: fi.Name(), Display: p.Display, ContentType: contentType(fi.Name()), Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// signed is a verified token's content.
type signed struct {
	exp, size, mtime int64
	folder, name     string
}

// verify checks the MAC before it reads anything else of the token.
func (l *Links) verify(token string) (signed, error) {
	if len(token) > maxToken {
		return signed{}, ErrNotFound
	}
	p64, m64, ok := strings.Cut(token, ".")
	if !ok {
		return signed{}, ErrNotFound
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	mac, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, l.mac(payload)) {
		return signed{}, ErrNotFound
	}
	parts := strings.SplitN(string(payload), "\n", 6)
	if len(parts) != 6 || parts[0] != version {
		return signed{}, ErrNotFound
	}
	var s signed
	var errs [3]error
	s.exp, errs[0] = strconv.ParseInt(parts[1], 10, 64)
	s.size, errs[1] = strconv.ParseInt(parts[2], 10, 64)
	s.mtime, errs[2] = strconv.ParseInt(parts[3], 10, 64)
	if errors.Join(errs[:]...) != nil {
		return signed{}, ErrNotFound
	}
	s.folder, s.name = parts[4], parts[5]
	return s, nil
}
