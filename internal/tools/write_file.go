package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// WriteFile creates or replaces a file, or appends to it, atomically.
type WriteFile struct {
	tooldef.Def[writeFileArgs]
	ws *workspace.Workspace
}

// writeFileArgs: content is required, since "" is content, so absent is
// not empty.
type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"File path relative to the workspace; missing folders are created"`
	Content string `json:"content" jsonschema:"The text to write"`
	Mode    string `json:"mode,omitempty" jsonschema:"overwrite (default) replaces the file; append adds content at its end"`
}

// NewWriteFile returns write_file. The schema states the path bound the
// workspace enforces.
func NewWriteFile(ws *workspace.Workspace) *WriteFile {
	def := tooldef.New[writeFileArgs]("write_file",
		"Write text to a file in the workspace, creating it and its folders if needed. mode=overwrite (default) replaces "+
			"the file; mode=append adds to its end. Write very large content in several calls: the first with overwrite, the rest with append.",
		func(p tooldef.Prop) {
			p.Prop("path").MinLength(1).MaxLength(workspace.MaxPathLen)
			p.Prop("mode").Enum("overwrite", "append")
		},
		tooldef.Sample(writeFileArgs{Path: "b.txt", Content: "hello\n"}),
		tooldef.Title("Write file"), tooldef.Hints(tooldef.Destructive, tooldef.Idempotent))
	return &WriteFile{Def: def, ws: ws}
}

// MalformedHint is added when the model's arguments arrive truncated, which
// happens most with long content.
func (t *WriteFile) MalformedHint() string {
	return "If the content is large, write it in chunks: a first call with mode=\"overwrite\" and the next ones with mode=\"append\"."
}

func (t *WriteFile) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return "", err
	}
	p, err := ws.Resolve(args.Path)
	if err != nil {
		return "", err
	}
	if p.Name == "." {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "path must name a file, not the workspace folder itself.")
	}
	appendTo := args.Mode == "append"
	if err := ws.WriteString(p, args.Content, appendTo); err != nil {
		return "", err
	}
	n := utf8.RuneCountInString(args.Content)
	if appendTo {
		fi, err := p.Stat()
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Appended %d chars to %s (the file now has %d bytes)", n, p.Display, fi.Size()), nil
	}
	return fmt.Sprintf("Wrote %d chars to %s", n, p.Display), nil
}

var _ registry.Tool = (*WriteFile)(nil)
