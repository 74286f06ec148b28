package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"path"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/desktop"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tracing"
	"github.com/countbot/toolsvc/internal/workspace"
)

// Screenshot captures the desktop (X11) or a web page (headless Chromium)
// to a PNG in the workspace.
type Screenshot struct {
	tooldef.Def[screenshotArgs]
	ws      *workspace.Workspace
	browser *browser.Browser
	desktop *desktop.Capturer
	opts    ScreenshotOptions
}

// ScreenshotOptions bound the tool.
type ScreenshotOptions struct {
	// Timeout is the longest a web capture may take; the call's timeout
	// argument is capped to it.
	Timeout time.Duration
	// Now gives the time used in file names; nil is time.Now.
	Now func() time.Time
	// Tracer, when set, gives each capture a screenshot span (its type,
	// the page's URL). Nil: none.
	Tracer *tracing.Tracer
}

// Defaults of the tool's arguments.
const (
	screenshotDir            = "temp/screenshots"
	defaultViewportWidth     = 1280
	defaultViewportHeight    = 720
	defaultScreenshotTimeout = 30 * time.Second
)

// NewScreenshot returns screenshot. The browser is shared and started on the
// first web capture.
func NewScreenshot(ws *workspace.Workspace, b *browser.Browser, d *desktop.Capturer, opts ScreenshotOptions) *Screenshot {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	def := tooldef.New[screenshotArgs]("screenshot",
		"Take a screenshot and save it as a PNG in the workspace. type=web renders an http(s) page in a headless browser "+
			"(url; viewport_width/viewport_height; full_page for the whole page; wait_time for late scripts). type=desktop captures the "+
			"screen of the machine the service runs on (monitor 0 = all displays, 1.. = one display). Internal and private addresses "+
			"are refused. The result gives the saved path (default temp/screenshots/), the pixel size and the file size; "+
			"send or read the file with other tools.",
		func(p tooldef.Prop) {
			p.Prop("type").Enum("desktop", "web")
			p.Prop("url").MinLength(1).MaxLength(8192)
			p.Prop("output_path").MinLength(1).MaxLength(workspace.MaxPathLen)
			p.Prop("region").Enum("full")
			p.Prop("monitor").Minimum(0).Maximum(16)
			p.Prop("viewport_width").Minimum(320).Maximum(3840)
			p.Prop("viewport_height").Minimum(240).Maximum(2160)
			p.Prop("wait_time").Minimum(0).Maximum(10000)
			p.Prop("timeout").Minimum(1).Maximum(300)
		},
		tooldef.Sample(screenshotArgs{URL: "http://127.0.0.1:9/"}),
		// It saves the picture in the workspace, over the file output_path
		// names if there is one.
		tooldef.Title("Take screenshot"), tooldef.Hints(tooldef.Destructive, tooldef.OpenWorld))
	return &Screenshot{Def: def, ws: ws, browser: b, desktop: d, opts: opts}
}

// screenshotArgs: nothing is required; type follows from url, and is
// desktop without one. The schema states the path bound the workspace
// enforces.
type screenshotArgs struct {
	Type           string `json:"type,omitempty" jsonschema:"web: render a web page in a headless browser; desktop: the screen (X11 display) of the machine the service runs on. Default: web when url is given, else desktop"`
	URL            string `json:"url,omitempty" jsonschema:"web: the http:// or https:// page to capture"`
	OutputPath     string `json:"output_path,omitempty" jsonschema:"Where to save the PNG, relative to the workspace, ending in .png. Default: temp/screenshots/<unique name>.png"`
	Region         string `json:"region,omitempty" jsonschema:"desktop: 'full' captures the whole of the displays chosen by monitor"`
	Monitor        int    `json:"monitor,omitempty" jsonschema:"desktop: 0 (default) = all displays together; 1, 2, ... = only that display"`
	FullPage       bool   `json:"full_page,omitempty" jsonschema:"web: capture the whole page height (up to 16384 px) instead of the viewport only"`
	ViewportWidth  int    `json:"viewport_width,omitempty" jsonschema:"web: browser viewport width in pixels (default 1280)"`
	ViewportHeight int    `json:"viewport_height,omitempty" jsonschema:"web: browser viewport height in pixels (default 720)"`
	WaitTime       int    `json:"wait_time,omitempty" jsonschema:"web: extra milliseconds to wait after the page has loaded, for scripts and animations (default 0)"`
	Timeout        int    `json:"timeout,omitempty" jsonschema:"web: seconds allowed for the whole capture, like exec's timeout (default 30; the service may cap it lower)"`
}

// Timeout covers the longest web capture plus a browser start; the
// capture's own timeout (the argument) is applied inside.
func (t *Screenshot) Timeout() time.Duration {
	return 2*t.opts.Timeout + browser.DefaultStartTimeout + 5*time.Second
}

func (t *Screenshot) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	if args.Type == "" {
		args.Type = "desktop"
		if args.URL != "" {
			args.Type = "web"
		}
	}
	ws, err := callWorkspace(ctx, t.ws)
	if err != nil {
		return "", err
	}
	out, err := t.outputPath(ws, args)
	if err != nil {
		return "", err
	}
	if t.opts.Tracer == nil {
		return t.capture(ctx, ws, args, out)
	}
	ctx, span := t.opts.Tracer.StartScreenshot(ctx, args.Type, args.URL)
	text, err := t.capture(ctx, ws, args, out)
	span.EndErr(err)
	return text, err
}

// capture takes the screenshot args ask for into out.
func (t *Screenshot) capture(ctx context.Context, ws *workspace.Workspace, args screenshotArgs, out workspace.Path) (string, error) {
	if args.Type == "web" {
		return t.web(ctx, ws, args, out)
	}
	return t.desktopShot(ctx, ws, args, out)
}

// outputPath resolves where the PNG goes: the model's output_path, confined
// to the workspace whatever RESTRICT_TO_WORKSPACE says, or a unique name
// under temp/screenshots/.
func (t *Screenshot) outputPath(ws *workspace.Workspace, args screenshotArgs) (workspace.Path, error) {
	if args.OutputPath == "" {
		var rnd [4]byte
		_, _ = rand.Read(rnd[:])
		name := fmt.Sprintf("%s/%s-%s-%s.png", screenshotDir, args.Type, t.opts.Now().UTC().Format("20060102-150405.000"), hex.EncodeToString(rnd[:]))
		return ws.Resolve(name)
	}
	p, err := ws.Resolve(args.OutputPath)
	if err != nil {
		return p, err
	}
	if p.Outside {
		return p, toolerr.Errorf(toolerr.PathDenied, "output_path '%s' is outside the workspace; screenshots are saved inside it only. Next: give a path relative to the workspace, such as 'images/page.png', or leave output_path out.", runes.Shorten(args.OutputPath, runes.Echo))
	}
	if p.Name == "." || !strings.EqualFold(path.Ext(p.Name), ".png") {
		return p, toolerr.Errorf(toolerr.InvalidArguments, "output_path '%s' must name a .png file. Next: give a path such as 'images/page.png', or leave output_path out.", runes.Shorten(args.OutputPath, runes.Echo))
	}
	return p, nil
}

// captureTimeout is the time a web capture gets: the call's timeout
// argument in seconds (0: the default), capped by the service's bound.
func (t *Screenshot) captureTimeout(seconds int) time.Duration {
	timeout := defaultScreenshotTimeout
	if seconds > 0 {
		timeout = time.Duration(seconds) * time.Second
	}
	return min(timeout, t.opts.Timeout)
}

func (t *Screenshot) web(ctx context.Context, ws *workspace.Workspace, args screenshotArgs, out workspace.Path) (string, error) {
	if args.URL == "" {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "type=web needs url. Next: pass the http(s) address of the page, e.g. {\"type\":\"web\",\"url\":\"https://example.com\"}.")
	}
	req := browser.Request{
		Timeout:  t.captureTimeout(args.Timeout),
		URL:      args.URL,
		Width:    orDefault(args.ViewportWidth, defaultViewportWidth),
		Height:   orDefault(args.ViewportHeight, defaultViewportHeight),
		FullPage: args.FullPage,
		Wait:     time.Duration(args.WaitTime) * time.Millisecond,
	}
	registry.Progress(ctx, "status", "loading "+args.URL)
	shot, err := t.browser.Capture(ctx, req)
	if err != nil {
		return "", err
	}
	if err := ws.WriteFile(out, shot.PNG, false); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Screenshot of %s saved to %s (%dx%d px, %s).", args.URL, out.Display, shot.Width, shot.Height, humanSize(int64(len(shot.PNG))))
	if shot.FinalURL != "" && shot.FinalURL != args.URL {
		fmt.Fprintf(&b, "\nFinal URL: %s", shot.FinalURL)
	}
	if shot.Status != 0 {
		fmt.Fprintf(&b, "\nHTTP status: %d", shot.Status)
	}
	if shot.Title != "" {
		fmt.Fprintf(&b, "\nTitle: %s", shot.Title)
	}
	for _, n := range shot.Notes {
		fmt.Fprintf(&b, "\nNote: %s.", n)
	}
	if shot.NBlocked > 0 {
		fmt.Fprintf(&b, "\nThe network policy refused %d request(s) of the page, so parts of it may be missing:", shot.NBlocked)
		for _, s := range shot.Blocked {
			fmt.Fprintf(&b, "\n- %s", s)
		}
		if shot.NBlocked > len(shot.Blocked) {
			fmt.Fprintf(&b, "\n- ... and %d more", shot.NBlocked-len(shot.Blocked))
		}
	}
	return b.String(), nil
}

func (t *Screenshot) desktopShot(ctx context.Context, ws *workspace.Workspace, args screenshotArgs, out workspace.Path) (string, error) {
	if args.URL != "" {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "url is for type=web; type=desktop captures the screen. Next: pass type=web to capture the page.")
	}
	img, err := t.desktop.Capture(ctx, args.Monitor)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return "", toolerr.Errorf(toolerr.ToolError, "encoding the PNG failed: %w", err)
	}
	if err := ws.WriteFile(out, buf.Bytes(), false); err != nil {
		return "", err
	}
	which := "all displays"
	if args.Monitor > 0 {
		which = fmt.Sprintf("display %d", args.Monitor)
	}
	size := img.Bounds().Size()
	return fmt.Sprintf("Desktop screenshot (%s) saved to %s (%dx%d px, %s).", which, out.Display, size.X, size.Y, humanSize(int64(buf.Len()))), nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

var _ registry.Tool = (*Screenshot)(nil)
var _ registry.Timeouter = (*Screenshot)(nil)
