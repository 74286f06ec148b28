package mcpmount

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// result turns a call's result into the text a model reads: text parts
// joined by newlines; images, audio and embedded resources saved into the
// calling key's folder (see save) under <Folder>/<server>/ and named by a
// line in their place;
// resource links named; structured content as JSON when there is nothing
// else. isError makes it a tool error carrying the same text.
func (s *Server) result(ctx context.Context, t *Tool, res *mcp.CallToolResult) (string, error) {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, s.save(ctx, t, "image", c.MIMEType, "", c.Data))
		case *mcp.AudioContent:
			parts = append(parts, s.save(ctx, t, "audio", c.MIMEType, "", c.Data))
		case *mcp.EmbeddedResource:
			r := c.Resource
			if r == nil {
				continue
			}
			data := r.Blob
			if data == nil {
				data = []byte(r.Text)
			}
			parts = append(parts, s.save(ctx, t, "resource "+r.URI, r.MIMEType, r.URI, data))
		case *mcp.ResourceLink:
			line := fmt.Sprintf("[resource link: %s", c.URI)
			if c.Name != "" {
				line += " (" + c.Name + ")"
			}
			parts = append(parts, line+"]")
		default:
			parts = append(parts, fmt.Sprintf("[content of type %T left out]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := s.bound(strings.ToValidUTF8(strings.Join(parts, "\n"), "\uFFFD"))
	text = s.red.String(text)
	if res.IsError {
		if strings.TrimSpace(text) == "" {
			text = "(no message)"
		}
		return "", toolerr.Errorf(toolerr.ToolError, "the tool %s of the MCP server %s reported an error: %s\n\nNext: correct the arguments as the message says, or use another tool.", t.remote, s.name, text)
	}
	if strings.TrimSpace(text) == "" {
		return "(no output)", nil
	}
	return text, nil
}

// bound cuts text beyond MaxOutput characters in the middle, saying so.
func (s *Server) bound(text string) string {
	n := utf8.RuneCountInString(text)
	if n <= s.d.MaxOutput {
		return text
	}
	half := s.d.MaxOutput / 2
	head := runes.Prefix(text, half)
	tail := text[len(text)-len(suffix(text, half)):]
	return head + fmt.Sprintf("\n\n... [%d characters cut here (%d in all); the first and last %d are shown. Next: ask the tool for less at a time] ...\n\n", n-2*half, n, half) + tail
}

// suffix returns the last n characters of s.
func suffix(s string, n int) string {
	i := len(s)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// save writes content into the calling key's own folder (the whole
// workspace for a call without one), where that key's file tools find it
// and no other key's reach it, whether the server is shared or the key's
// own; it returns the line that names the file, relative to that folder,
// in the result.
func (s *Server) save(ctx context.Context, t *Tool, kind, mimeType, uri string, data []byte) string {
	if len(data) > s.d.MaxFileBytes {
		return fmt.Sprintf("[%s (%s, %d bytes) not saved: larger than the bound of %d bytes]", kind, orUnknown(mimeType), len(data), s.d.MaxFileBytes)
	}
	name := path.Join(s.d.Folder, safeName(s.name), fmt.Sprintf("%s-%s-%s%s", safeName(t.remote), time.Now().UTC().Format("20060102-150405"), randomHex(), extension(mimeType, uri)))
	call, _ := registry.CallFrom(ctx)
	ws, err := s.files.Folder(call.Workspace)
	var p workspace.Path
	if err == nil {
		p, err = ws.Resolve(name)
	}
	if err == nil {
		err = ws.WriteFile(p, data, false)
	}
	if err != nil {
		return fmt.Sprintf("[%s (%s, %d bytes) not saved: %s]", kind, orUnknown(mimeType), len(data), toolerr.ErrorMessage(err))
	}
	return fmt.Sprintf("[%s saved to %s (%s, %d bytes)]", kind, p.Display, orUnknown(mimeType), len(data))
}

func orUnknown(m string) string {
	if m == "" {
		return "type unknown"
	}
	return m
}

// safeName keeps a file name part to [a-zA-Z0-9_-], at most 40 characters.
func safeName(s string) string {
	s = badNameChars.ReplaceAllString(s, "_")
	if len(s) > 40 {
		s = s[:40]
	}
	if s == "" {
		s = "_"
	}
	return s
}

// extension picks a file extension from the MIME type, else from the
// URI's path, else ".bin".
func extension(mimeType, uri string) string {
	known := map[string]string{
		"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/svg+xml": ".svg",
		"audio/wav": ".wav", "audio/x-wav": ".wav", "audio/mpeg": ".mp3", "audio/ogg": ".ogg",
		"text/plain": ".txt", "text/markdown": ".md", "text/html": ".html", "text/csv": ".csv",
		"application/json": ".json", "application/pdf": ".pdf", "application/gzip": ".gz",
	}
	base, _, _ := strings.Cut(mimeType, ";")
	if e, ok := known[strings.TrimSpace(base)]; ok {
		return e
	}
	if u, err := url.Parse(uri); err == nil {
		if e := path.Ext(u.Path); e != "" && len(e) <= 8 && !badNameChars.MatchString(e[1:]) {
			return e
		}
	}
	if exts, _ := mime.ExtensionsByType(base); len(exts) > 0 {
		return exts[0]
	}
	if strings.HasPrefix(base, "text/") {
		return ".txt"
	}
	return ".bin"
}

func randomHex() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
