package registry

import (
	"context"
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

// TestBigArgumentsCheckedAsWhole: arguments over bigArguments are checked
// on a copy with their long strings cut, with the outcome of checking them
// whole, and the tool gets them whole.
func TestBigArgumentsCheckedAsWhole(t *testing.T) {
	const schema = `{"type":"object","properties":{
		"content":{"type":"string"},
		"tag":{"type":"string","maxLength":6000},
		"mode":{"type":"string","enum":["a","b"]},
		"n":{"type":"integer"}},"required":["content"],"additionalProperties":false}`
	var got string
	tool := &fakeTool{name: "big", schema: schema, run: func(_ context.Context, args json.RawMessage) (string, error) {
		a, err := Decode[struct {
			Content string `json:"content"`
			Tag     string `json:"tag"`
		}](args)
		got = a.Content
		return "ok", err
	}}
	if shortenAt(json.RawMessage(schema), nil) == 0 {
		t.Fatal("a schema of lengths and enums is not checked on cut strings")
	}
	r := New(Options{})
	if err := r.Register(tool); err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("line \"quoted\" é\n", 1<<17) // 2.1 MB
	for _, c := range []struct {
		name    string
		args    map[string]any
		problem string // "" when the call must succeed
	}{
		{"valid", map[string]any{"content": content, "tag": strings.Repeat("t", 6000), "n": 3}, ""},
		{"a cut string still over maxLength", map[string]any{"content": content, "tag": strings.Repeat("t", 6001)}, "tag"},
		{"a big string not in the enum", map[string]any{"content": content, "mode": strings.Repeat("a", 200000)}, "mode"},
		{"a big string for an integer", map[string]any{"content": content, "n": strings.Repeat("1", 200000)}, "n"},
		{"an unknown big argument", map[string]any{"content": content, "extra": content}, "extra"},
		{"5.0 for an integer, with a big string", map[string]any{"content": content, "n": 5.0}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got = ""
			raw, _ := json.Marshal(c.args)
			res := r.Invoke(context.Background(), "big", raw, Meta{})
			if c.problem == "" {
				if res.Status != StatusSuccess || got != content {
					t.Fatalf("%s %.300s; content whole: %v", res.Status, res.Result, got == content)
				}
				return
			}
			if res.Status == StatusSuccess || !strings.Contains(res.Result, c.problem) {
				t.Fatalf("%s %.300s", res.Status, res.Result)
			}
		})
	}
}

func TestShortenAtRefusesPrefixSensitiveSchemas(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"s":{"type":"string","pattern":"^a+$"}}}`,
		`{"type":"object","properties":{"s":{"type":"string","format":"uri"}}}`,
		`{"type":"object","properties":{"s":{"const":"x"}}}`,
	} {
		if n := shortenAt(json.RawMessage(schema), nil); n != 0 {
			t.Errorf("shortenAt(%s) = %d, want 0", schema, n)
		}
	}
	if n := shortenAt(json.RawMessage(`{"type":"object"}`), []Rule{ExactlyOne("a", "b")}); n != 0 {
		t.Errorf("shortenAt with rules = %d, want 0", n)
	}
}
