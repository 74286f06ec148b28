package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/channels"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// SendMedia sends workspace files, with a message, to the chat the session
// belongs to (Feishu, QQ, DingTalk, WeCom, Telegram, Discord, Slack or a
// webhook). Each file is checked (confined to the workspace, an accepted
// type, at most 20 MB and within the channel's own limits) before anything
// is uploaded; the result lists each file as sent, refused or failed.
type SendMedia struct {
	tooldef.Def[sendMediaArgs]
	ws       *workspace.Workspace
	channels *channels.Manager
	log      zerolog.Logger
}

type sendMediaArgs struct {
	FilePaths []string `json:"file_paths" jsonschema:"Files in the workspace to send, e.g. [\"report.pdf\", \"charts/q3.png\"]"`
	Message   string   `json:"message,omitempty" jsonschema:"Text sent with the files (optional)"`
}

// sendMediaMaxFiles bounds the files of one call.
const sendMediaMaxFiles = 10

// NewSendMedia returns send_media over the configured channels. Files a
// channel failed to take are logged for the operator (a wrong secret, an
// app without the permission), besides being reported to the model.
func NewSendMedia(ws *workspace.Workspace, ch *channels.Manager, log zerolog.Logger) *SendMedia {
	def := tooldef.New[sendMediaArgs]("send_media",
		"Send files from the workspace, with an optional message, to the chat this conversation comes from "+
			"(Feishu, QQ, DingTalk, WeCom, Telegram, Discord, Slack...). Types: "+strings.Join(channels.Types(), ", ")+
			"; at most 20 MB a file, less on some channels. Invalid files are listed and the valid ones still sent. "+
			"In a conversation without a chat channel nothing is sent and the message comes back for you to give in your reply.",
		func(p tooldef.Prop) {
			p.Prop("file_paths").MinItems(1).MaxItems(sendMediaMaxFiles).Items().MinLength(1).MaxLength(workspace.MaxPathLen)
			p.Prop("message").MaxLength(4000)
		},
		tooldef.Sample(sendMediaArgs{FilePaths: []string{"a.txt"}}),
		tooldef.Title("Send file to chat"), tooldef.Hints(tooldef.OpenWorld))
	return &SendMedia{Def: def, ws: ws, channels: ch, log: log}
}

// fileLine is one file's line in the result.
type fileLine struct {
	display string
	file    *channels.File
	refused string // why it was not sent, before any upload
	failed  error  // what the channel said
}

func (t *SendMedia) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	call, _ := registry.CallFrom(ctx)
	target, err := channels.ParseTarget(call.SessionID, call.Channel, call.ChatID, t.channels.Accounts)
	if errors.Is(err, channels.ErrNoChannel) {
		// As in CountBot: outside a chat channel the message is handed
		// back, and nothing is sent.
		msg := "Nothing was sent: this conversation does not come from a chat channel (" + err.Error() + "). " +
			"Next: give the user the message and the file paths (" + strings.Join(args.FilePaths, ", ") + ") in your reply."
		if strings.TrimSpace(args.Message) != "" {
			msg += "\nMessage:\n" + args.Message
		}
		return msg, nil
	}
	if err != nil {
		return "", toolerr.Errorf(toolerr.ToolError, "cannot tell which chat to send to: %v. Next: give the user the file paths in your reply instead.", err)
	}
	sender, target, err := t.channels.Sender(target)
	if err != nil {
		return "", toolerr.Errorf(toolerr.Unavailable, "%v. Next: give the user the file paths in your reply instead.", err)
	}
	if target.ChatID == "" && channels.NeedsChat(sender) {
		return "", toolerr.Errorf(toolerr.ToolError, "the request names channel %s but no chat to send to (X-Chat-ID). Next: give the user the file paths in your reply instead.", target.Channel)
	}

	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return "", err
	}
	lines := make([]*fileLine, 0, len(args.FilePaths))
	var files []*channels.File
	for _, p := range args.FilePaths {
		l, f := t.check(ws, call.Workspace, p, sender)
		if f != nil {
			defer f.Close()
		}
		lines = append(lines, l)
		if l.refused == "" {
			files = append(files, l.file)
		}
	}
	if len(files) == 0 {
		return "", toolerr.Errorf(toolerr.ToolError, "%s", report(target, lines, nil, args.Message, true))
	}
	out := sender.Send(ctx, &channels.Message{Session: call.SessionID, Target: target, Caption: args.Message, Files: files, ReplyTo: call.ReplyTo})
	i := 0
	sent := 0
	for _, l := range lines {
		if l.refused != "" {
			continue
		}
		if i < len(out.Files) {
			l.failed = out.Files[i]
		} else {
			l.failed = errors.New("the channel gave no answer for it")
		}
		if l.failed == nil {
			sent++
		} else {
			t.log.Warn().Str("tool", "send_media").Str("call_id", call.ID).Str("channel", target.Channel).Str("account", target.Account).
				Str("file", l.display).Str("error", l.failed.Error()).Msg("send_media: a file was not delivered")
		}
		i++
	}
	text := report(target, lines, out.Caption, args.Message, sent == 0)
	if len(out.Notes) > 0 {
		// Sent, but not to everyone the call named (WeCom's partial
		// delivery): the model is told who did not get it.
		text += "\nPartly delivered:\n- " + strings.Join(out.Notes, "\n- ")
	}
	if sent == 0 {
		return "", toolerr.Errorf(toolerr.ToolError, "%s", text)
	}
	return text, nil
}

// check resolves, opens and measures one file in ws (the key's folder
// when it has one), and asks the channel. The file, when opened, is the
// caller's to close.
func (t *SendMedia) check(ws *workspace.Workspace, folder, name string, sender channels.Sender) (*fileLine, *os.File) {
	l := &fileLine{display: name}
	p, err := ws.Resolve(name)
	if err != nil {
		l.refused = err.Error()
		return l, nil
	}
	l.display = p.Display
	if _, _, ok := channels.KindOf(p.Name); !ok {
		l.refused = "its type is not one send_media sends (" + strings.Join(channels.Types(), ", ") + ")"
		return l, nil
	}
	f, err := p.Open()
	if err != nil {
		l.refused = err.Error()
		return l, nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		l.refused = "it is not a regular file"
		return l, f
	}
	file, _ := channels.NewFile(p.Name, fi.Size(), f)
	if !p.Outside {
		file.Path, file.Folder = p.Display, folder // a channel may link to it; never to a file outside
	}
	l.file = file
	switch {
	case fi.Size() > channels.MaxFileSize:
		l.refused = fmt.Sprintf("it is %s; send_media sends at most 20 MB a file. Next: compress or split it", humanSize(fi.Size()))
	default:
		if why := channels.CheckFile(sender, file); why != "" {
			l.refused = fmt.Sprintf("it is %s and %s", humanSize(fi.Size()), why)
		}
	}
	return l, f
}

// report lists what happened to each file and to the message.
func report(t channels.Target, lines []*fileLine, captionErr error, caption string, none bool) string {
	var b strings.Builder
	sent := 0
	for _, l := range lines {
		if l.refused == "" && l.failed == nil {
			sent++
		}
	}
	where := fmt.Sprintf("%s (account %s", t.Channel, t.Account)
	if t.ChatID != "" {
		where += ", chat " + t.ChatID
	}
	where += ")"
	if none {
		fmt.Fprintf(&b, "Nothing was sent to %s.\n", where)
	} else {
		fmt.Fprintf(&b, "Sent %d of %d files to %s.\n", sent, len(lines), where)
	}
	for _, l := range lines {
		switch {
		case l.refused != "":
			fmt.Fprintf(&b, "- %s: refused: %s\n", l.display, l.refused)
		case l.failed != nil:
			fmt.Fprintf(&b, "- %s: failed: %v\n", l.display, l.failed)
		default:
			fmt.Fprintf(&b, "- %s: sent\n", l.display)
		}
	}
	if strings.TrimSpace(caption) != "" && !none {
		if captionErr != nil {
			fmt.Fprintf(&b, "Message: failed: %v\n", captionErr)
		} else {
			b.WriteString("Message: sent\n")
		}
	}
	if none || sent < len(lines) {
		b.WriteString("Next: fix what the refused files need, or give the user their paths in your reply; do not tell the user they were sent.")
	}
	return strings.TrimRight(b.String(), "\n")
}

var _ registry.Tool = (*SendMedia)(nil)
