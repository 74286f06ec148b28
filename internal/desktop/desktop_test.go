package desktop

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/desktop/desktoptest"
	"github.com/countbot/toolsvc/internal/toolerr"
)

func TestNoDisplay(t *testing.T) {
	for _, display := range []string{"", ":4242"} {
		t.Run("DISPLAY="+display, func(t *testing.T) {
			t.Setenv("DISPLAY", display)
			var c Capturer
			_, err := c.Capture(context.Background(), 0)
			var de *toolerr.Error
			if !errors.As(err, &de) || de.Code != toolerr.Unavailable {
				t.Fatalf("want an unavailable error, got %v", err)
			}
			for _, want := range []string{"DISPLAY", "Xvfb"} {
				if !strings.Contains(de.Message, want) {
					t.Errorf("message lacks %q: %s", want, de.Message)
				}
			}
		})
	}
}

func TestCaptureXvfb(t *testing.T) {
	display := desktoptest.Xvfb(t, "640x480x24", "320x240x24")
	desktoptest.FillRoot(t, display, 0x00ff00)
	c := New()
	tests := []struct {
		monitor int
		w, h    int
	}{
		{0, 640, 480}, // Xvfb puts both screens at the origin: the box around them is the larger
		{1, 640, 480},
		{2, 320, 240},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("monitor=", tt.monitor), func(t *testing.T) {
			img, err := c.Capture(context.Background(), tt.monitor)
			if err != nil {
				t.Fatal(err)
			}
			if got := img.Bounds().Size(); got != (image.Point{tt.w, tt.h}) {
				t.Fatalf("monitor %d: size %v, want %dx%d", tt.monitor, got, tt.w, tt.h)
			}
			// The painted background shows on the first screen.
			if tt.monitor <= 1 {
				r, g, b, _ := img.At(10, 10).RGBA()
				if r>>8 != 0 || g>>8 != 0xff || b>>8 != 0 {
					t.Errorf("pixel (10,10) = %d,%d,%d, want pure green", r>>8, g>>8, b>>8)
				}
			}
		})
	}
	_, err := c.Capture(context.Background(), 3)
	var de *toolerr.Error
	if !errors.As(err, &de) || de.Code != toolerr.InvalidArguments {
		t.Fatalf("monitor 3 of 2: want invalid_arguments, got %v", err)
	}
}

// TestCaptureResettingXvfb: an X server that resets when its last client
// goes (Xvfb as xvfb-run starts it) is captured every time, calls in a
// row included: the capture holds a connection open across the screenshot
// library's own, so the server never resets between them.
func TestCaptureResettingXvfb(t *testing.T) {
	desktoptest.XvfbResetting(t, "640x480x24")
	c := New()
	for i := range 20 {
		img, err := c.Capture(context.Background(), 0)
		if err != nil {
			t.Fatalf("capture %d: %v", i+1, err)
		}
		if got := img.Bounds().Size(); got != (image.Point{640, 480}) {
			t.Fatalf("capture %d: size %v, want 640x480", i+1, got)
		}
	}
}
