package registry

import (
	"encoding/json"
	"strings"
	"testing"
)

type bigArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    string `json:"mode,omitempty"`
	Count   int    `json:"count"`
	Quoted  string `json:"quoted,string"`
	Other   string
	Nested  struct {
		Text string `json:"text"`
	} `json:"nested"`
}

// FuzzDecodeBig: whenever decodeBig takes arguments, it reads them as
// encoding/json does.
func FuzzDecodeBig(f *testing.F) {
	f.Add(`{"path":"a","content":"` + strings.Repeat(`x\n\"\\\/\t\u00e9\ud83d\ude00\ud800 é`, 4) + `","count":3}`)
	f.Add(`{"content":"\udc00\u0041bcdefgh","Other":"12345678910"}`)
	f.Add(`{"Content":"0123456789"}`)
	f.Add(`{"content":"0123456789abc","Content":"x"}`)
	f.Add(`{"content":"0123456789","content":"abcdefghijk"}`)
	f.Add(`{"quoted":"\"0123456789\"","nested":{"text":"0123456789abc"}}`)
	f.Add("{\"content\":\"bad \xff utf-8 bytes here\"}")
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		var got, want bigArgs
		if !decodeBig([]byte(doc), &got, 8) {
			return
		}
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("decodeBig took what encoding/json refuses (%v)", err)
		}
		if got != want {
			t.Fatalf("decodeBig read\n%+v\nencoding/json\n%+v", got, want)
		}
	})
}

func TestDecodeBigTakesTheBigString(t *testing.T) {
	content := strings.Repeat("line \"one\"\n\tétoile 🌟\n", 5000)
	raw, _ := json.Marshal(map[string]any{"path": "a.txt", "content": content, "count": 2})
	var got bigArgs
	if !decodeBig(raw, &got, 1024) || got.Content != content || got.Path != "a.txt" || got.Count != 2 {
		t.Fatalf("decodeBig: %v %q %d", got.Content == content, got.Path, got.Count)
	}
}
