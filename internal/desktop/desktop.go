// Package desktop captures the X11 screen (a real desktop or Xvfb) with
// github.com/kbinani/screenshot.
package desktop

import (
	"context"
	"errors"
	"image"
	"io"
	"log"
	"os"
	"sync"

	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/jezek/xgb"
	"github.com/kbinani/screenshot"
)

// MaxPixels bounds a capture (8K by 8K), so a huge virtual screen cannot
// exhaust memory.
const MaxPixels = 7680 * 7680

// Capturer takes desktop screenshots, one at a time. It keeps a
// connection to the X server open from its first capture on (see probe),
// and makes a new one after a capture that failed.
type Capturer struct {
	mu   sync.Mutex
	conn *xgb.Conn
}

// quietXGB silences the X library's package logger once per process: it
// would otherwise print a line to stderr for every connection made without
// an ~/.Xauthority file (the usual case under Xvfb). It is the one
// package-level variable here, because the logger it sets is one too.
var quietXGB sync.Once

// New returns a Capturer.
func New() *Capturer {
	quietXGB.Do(func() { xgb.Logger = log.New(io.Discard, "", 0) })
	return &Capturer{}
}

// Displays returns the bounds of every display, relative to the first one.
func (c *Capturer) Displays() ([]image.Rectangle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.hold(); err != nil {
		return nil, err
	}
	d, err := displays()
	if err != nil {
		c.drop()
	}
	return d, err
}

// hold opens the connection the Capturer keeps, when it has none.
func (c *Capturer) hold() error {
	if c.conn != nil {
		return nil
	}
	conn, err := probe()
	if err != nil {
		return err
	}
	c.conn = conn
	return nil
}

// drop closes the connection kept, after a failure: the next capture
// connects anew (to a server that was restarted, say).
func (c *Capturer) drop() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// displays reads the displays' bounds, while the caller holds a connection
// to the X server open (see probe).
func displays() ([]image.Rectangle, error) {
	n := screenshot.NumActiveDisplays()
	if n <= 0 {
		return nil, toolerr.Errorf(toolerr.Unavailable, "the X display %s reports no screens (its Xinerama/RandR extension gave none). Next: the operator should check the X server.", os.Getenv("DISPLAY"))
	}
	out := make([]image.Rectangle, n)
	for i := range out {
		out[i] = screenshot.GetDisplayBounds(i)
	}
	return out, nil
}

// Capture grabs monitor 0 (every display: the box around all of them) or
// monitor N (the Nth display, counted from 1). It stops waiting when ctx
// ends.
func (c *Capturer) Capture(ctx context.Context, monitor int) (*image.RGBA, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.hold(); err != nil {
		return nil, err
	}
	img, err := c.capture(ctx, monitor)
	if err != nil {
		var te *toolerr.Error
		if !errors.As(err, &te) || te.Code != toolerr.InvalidArguments {
			c.drop()
		}
	}
	return img, err
}

func (c *Capturer) capture(ctx context.Context, monitor int) (*image.RGBA, error) {
	displays, err := displays()
	if err != nil {
		return nil, err
	}
	if monitor < 0 || monitor > len(displays) {
		return nil, toolerr.Errorf(toolerr.InvalidArguments, "monitor %d does not exist: this desktop has %d display(s). Next: use monitor 0 for all displays, or 1 to %d for one.", monitor, len(displays), len(displays))
	}
	var rect image.Rectangle
	if monitor == 0 {
		for _, d := range displays {
			rect = rect.Union(d)
		}
	} else {
		rect = displays[monitor-1]
	}
	if rect.Empty() {
		return nil, &toolerr.Error{Code: toolerr.Unavailable, Message: "the display has no size. Next: the operator should check the X server."}
	}
	if rect.Dx()*rect.Dy() > MaxPixels {
		return nil, toolerr.Errorf(toolerr.InvalidArguments, "the desktop is %dx%d pixels, more than this tool captures at once. Next: capture one display with monitor=1..%d.", rect.Dx(), rect.Dy(), len(displays))
	}
	type result struct {
		img *image.RGBA
		err error
	}
	done := make(chan result, 1)
	go func() {
		img, err := screenshot.CaptureRect(rect)
		done <- result{img, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, toolerr.Errorf(toolerr.ToolError, "capturing the X display %s failed: %w", os.Getenv("DISPLAY"), r.err)
		}
		return r.img, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// probe says clearly why there is no X display to capture, or returns a
// connection to it for the Capturer to hold open: the screenshot library
// opens a connection of its own for each query, and an X server started
// without -noreset (Xvfb, xvfb-run) resets itself each time its last
// client goes, so that without one held open a query made just after
// another finds the server resetting ("reports no screens", "has no
// size", "connection reset by peer").
func probe() (*xgb.Conn, error) {
	display := os.Getenv("DISPLAY")
	if display == "" {
		return nil, &toolerr.Error{Code: toolerr.Unavailable, Message: "desktop screenshots need an X11 display, and DISPLAY is not set (the service runs without a screen). " +
			"Next: the operator must start toolsvc with DISPLAY set to an X server (for example DISPLAY=:0), or under a virtual one " +
			"(Xvfb :99 & then DISPLAY=:99, or xvfb-run); web pages can still be captured with type=web."}
	}
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, toolerr.Errorf(toolerr.Unavailable, "cannot connect to the X display DISPLAY=%s (%w). "+
			"Next: the operator must check that the X server (or Xvfb) runs and that toolsvc may use it (xauth), or unset DISPLAY and run under xvfb-run.", display, err)
	}
	return conn, nil
}
