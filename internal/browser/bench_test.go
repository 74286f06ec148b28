package browser

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// BenchmarkCaptureLatency measures one web screenshot (a 1280x720 page of
// one colour on loopback) when the call must start the browser ("first")
// and when the browser is already running ("later"):
//
//	go test -run '^$' -bench CaptureLatency -benchtime 5x ./internal/browser/
func BenchmarkCaptureLatency(b *testing.B) {
	needChrome(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body style="margin:0;background:#f00"><h1>benchmark</h1></body></html>`)
	}))
	defer srv.Close()
	req := Request{URL: srv.URL, Width: 1280, Height: 720, Timeout: 60 * time.Second}
	newB := func() *Browser {
		return New(Options{ExecPath: os.Getenv("TOOLSVC_CHROME_PATH"), Guard: testGuard(b), Log: zerolog.Nop()})
	}
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			br := newB()
			if _, err := br.Capture(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			br.Close()
			b.StartTimer()
		}
	})
	b.Run("later", func(b *testing.B) {
		br := newB()
		defer br.Close()
		if _, err := br.Capture(context.Background(), req); err != nil { // start it
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := br.Capture(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
