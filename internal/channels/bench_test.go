package channels

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkUploadMemory sends one 16 MiB file per operation to a receiver
// that discards it. B/op against the file's size shows whether the upload
// is streamed (a small fraction) or held whole (at least the size).
func BenchmarkUploadMemory(b *testing.B) {
	const size = 16 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	f, _ := NewFile("big.zip", size, bytes.NewReader(data))
	o := Options{Client: srv.Client()}
	for name, s := range map[string]Sender{
		"webhook-signed": NewWebhook(WebhookAccount{URL: srv.URL, Secret: "s"}, o),
		"telegram":       NewTelegram(TelegramAccount{Token: "1:t", BaseURL: srv.URL}, o),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size)
			for b.Loop() {
				if out := s.Send(context.Background(), &Message{Target: Target{ChatID: "1"}, Files: []*File{f}}); out.Files[0] != nil {
					b.Fatal(out.Files[0])
				}
			}
		})
	}
}
