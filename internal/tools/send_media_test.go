package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/channels"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// recordingSender stands in for a channel: it records what it is given and
// fails the files named in fail.
type recordingSender struct {
	limit int64
	fail  map[string]bool
	got   []*channels.Message
	data  map[string]string
	// notes, when set, are the outcome's notes (a partial delivery).
	notes []string
}

func (s *recordingSender) Check(f *channels.File) string {
	if s.limit > 0 && f.Size > s.limit {
		return "the fake channel takes at most 10 bytes"
	}
	return ""
}

func (s *recordingSender) Send(ctx context.Context, m *channels.Message) channels.Outcome {
	s.got = append(s.got, m)
	var out channels.Outcome
	for _, f := range m.Files {
		b, _ := io.ReadAll(io.NewSectionReader(f.Content, 0, f.Size))
		s.data[f.Name] = string(b)
		if s.fail[f.Name] {
			out.Files = append(out.Files, errors.New("fake refused it (HTTP 500): boom"))
		} else {
			out.Files = append(out.Files, nil)
		}
	}
	out.Notes = s.notes
	return out
}

func newSendMediaTest(t *testing.T) (*SendMedia, *recordingSender, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	rs := &recordingSender{fail: map[string]bool{}, data: map[string]string{}}
	m := channels.NewManager()
	m.Add("feishu", "", rs)
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("report.pdf", "%PDF-1.7")
	write("chart.png", "png")
	write("notes.exe", "MZ")
	write("long.txt", "more than ten bytes")
	if err := os.Mkdir(filepath.Join(dir, "folder.pdf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "secret.txt"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(channels.MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	return NewSendMedia(ws, m, zerolog.Nop()), rs, base
}

func invokeSendMedia(t *testing.T, tool *SendMedia, session string, args any) (string, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	ctx := registry.WithCall(context.Background(), registry.Call{ID: "c1", Tool: "send_media", Facts: callinfo.Facts{SessionID: session}})
	return tool.Execute(ctx, raw)
}

func TestSendMedia(t *testing.T) {
	tool, rs, _ := newSendMediaTest(t)
	const session = "feishu:default:oc_42:1712345678"

	t.Run("a partial delivery names who did not get it", func(t *testing.T) {
		rs.notes = []string{"report.pdf: not delivered to ghosta (WeCom: invaliduser). Next: check the user IDs."}
		defer func() { rs.notes = nil }()
		out, err := invokeSendMedia(t, tool, session, map[string]any{"file_paths": []string{"report.pdf"}})
		if err != nil || !strings.Contains(out, "report.pdf: sent") || !strings.Contains(out, "Partly delivered:\n- report.pdf: not delivered to ghosta") {
			t.Errorf("result %q, %v", out, err)
		}
	})

	t.Run("valid files sent, invalid ones listed", func(t *testing.T) {
		out, err := invokeSendMedia(t, tool, session, map[string]any{
			"file_paths": []string{"report.pdf", "chart.png", "notes.exe", "../secret.txt", "link.txt", "missing.pdf", "big.zip", "/etc/passwd", "folder.pdf"},
			"message":    "Q3",
		})
		if err != nil {
			t.Fatalf("err %v", err)
		}
		for _, want := range []string{
			"Sent 2 of 9 files to feishu (account default, chat oc_42)",
			"- report.pdf: sent", "- chart.png: sent",
			"- notes.exe: refused: its type",
			"- ../secret.txt: refused: path '../secret.txt' is outside the workspace",
			"- link.txt: refused: path 'link.txt' leads outside the workspace",
			"- missing.pdf: refused: 'missing.pdf' does not exist",
			"- big.zip: refused: it is 20.0 MiB; send_media sends at most 20 MB",
			"- /etc/passwd: refused: path '/etc/passwd' is outside the workspace",
			"- folder.pdf: refused: it is not a regular file",
			"Next:",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("result lacks %q:\n%s", want, out)
			}
		}
		m := rs.got[len(rs.got)-1]
		if m.Target != (channels.Target{Channel: "feishu", Account: "default", ChatID: "oc_42"}) || m.Caption != "Q3" || len(m.Files) != 2 {
			t.Errorf("message %+v", m)
		}
		if rs.data["report.pdf"] != "%PDF-1.7" || strings.Contains(rs.data["secret.txt"], "outside") {
			t.Errorf("contents %q", rs.data)
		}
	})
	t.Run("channel limit", func(t *testing.T) {
		rs.limit = 10
		defer func() { rs.limit = 0 }()
		out, err := invokeSendMedia(t, tool, session, map[string]any{"file_paths": []string{"long.txt", "chart.png"}})
		if err != nil || !strings.Contains(out, "- long.txt: refused: it is 19 B and the fake channel takes at most 10 bytes") {
			t.Errorf("%v\n%s", err, out)
		}
	})
	t.Run("channel failure is not success", func(t *testing.T) {
		rs.fail["report.pdf"] = true
		defer delete(rs.fail, "report.pdf")
		_, err := invokeSendMedia(t, tool, session, map[string]any{"file_paths": []string{"report.pdf", "notes.exe"}})
		if code := toolerr.ErrorCode(err); code != toolerr.ToolError || !strings.Contains(err.Error(), "- report.pdf: failed: fake refused it (HTTP 500): boom") ||
			!strings.Contains(err.Error(), "Nothing was sent") {
			t.Errorf("got %v", err)
		}
		out, err := invokeSendMedia(t, tool, session, map[string]any{"file_paths": []string{"report.pdf", "chart.png"}})
		if err != nil || !strings.Contains(out, "Sent 1 of 2") || !strings.Contains(out, "- report.pdf: failed") {
			t.Errorf("partial: %v\n%s", err, out)
		}
	})
	t.Run("nothing valid", func(t *testing.T) {
		n := len(rs.got)
		_, err := invokeSendMedia(t, tool, session, map[string]any{"file_paths": []string{"notes.exe"}, "message": "hi"})
		if err == nil || !strings.Contains(err.Error(), "Nothing was sent") {
			t.Errorf("got %v", err)
		}
		if len(rs.got) != n {
			t.Error("the channel was called although no file was valid")
		}
	})
	t.Run("no channel returns the message", func(t *testing.T) {
		n := len(rs.got)
		for _, s := range []string{"", "web:abc", "cli-session"} {
			out, err := invokeSendMedia(t, tool, s, map[string]any{"file_paths": []string{"report.pdf"}, "message": "Here is the report"})
			if err != nil || !strings.Contains(out, "Nothing was sent") || !strings.HasSuffix(out, "Message:\nHere is the report") {
				t.Errorf("%q: %v\n%s", s, err, out)
			}
		}
		if len(rs.got) != n {
			t.Error("something was sent without a channel")
		}
	})
	t.Run("channel not configured", func(t *testing.T) {
		_, err := invokeSendMedia(t, tool, "slack:C1:1712345678", map[string]any{"file_paths": []string{"report.pdf"}})
		if code := toolerr.ErrorCode(err); code != toolerr.Unavailable || !strings.Contains(err.Error(), "not configured") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("channel without chat", func(t *testing.T) {
		raw, _ := json.Marshal(map[string]any{"file_paths": []string{"chart.png"}})
		ctx := registry.WithCall(context.Background(), registry.Call{Facts: callinfo.Facts{Channel: "feishu"}})
		n := len(rs.got)
		if _, err := tool.Execute(ctx, raw); err == nil || !strings.Contains(err.Error(), "no chat to send to") {
			t.Errorf("got %v", err)
		}
		if len(rs.got) != n {
			t.Error("sent without a chat")
		}
	})
	t.Run("explicit headers", func(t *testing.T) {
		raw, _ := json.Marshal(map[string]any{"file_paths": []string{"chart.png"}})
		ctx := registry.WithCall(context.Background(), registry.Call{Facts: callinfo.Facts{SessionID: "web:1", Channel: "feishu", ChatID: "ou_7"}})
		if _, err := tool.Execute(ctx, raw); err != nil {
			t.Fatal(err)
		}
		if m := rs.got[len(rs.got)-1]; m.Target.ChatID != "ou_7" {
			t.Errorf("target %+v", m.Target)
		}
	})
}
