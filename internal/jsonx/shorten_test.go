package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// sameShape checks that short is long with some strings cut: the same
// keys and kinds, every string either equal or a prefix of the original
// keeping more than max/MaxEncodedRune - 1 characters.
func sameShape(t *testing.T, long, short any, max int) {
	t.Helper()
	switch l := long.(type) {
	case map[string]any:
		s, ok := short.(map[string]any)
		if !ok || len(s) != len(l) {
			t.Fatalf("object %v became %v", l, short)
		}
		for k, v := range l {
			sv, ok := s[k]
			if !ok {
				t.Fatalf("key %q lost", k)
			}
			sameShape(t, v, sv, max)
		}
	case []any:
		s, ok := short.([]any)
		if !ok || len(s) != len(l) {
			t.Fatalf("array %v became %v", l, short)
		}
		for i := range l {
			sameShape(t, l[i], s[i], max)
		}
	case string:
		s, ok := short.(string)
		if !ok || !strings.HasPrefix(l, s) {
			t.Fatalf("string %q became %q", l, short)
		}
		if s != l && utf8.RuneCountInString(s) <= max/MaxEncodedRune-1 {
			t.Fatalf("string cut to %d characters (max %d bytes)", utf8.RuneCountInString(s), max)
		}
	default:
		if long != short {
			t.Fatalf("%v became %v", long, short)
		}
	}
}

func FuzzShortenStrings(f *testing.F) {
	f.Add(`{"path":"a.txt","content":"`+strings.Repeat(`ab\"\n\u00e9\ud83d\ude00€`, 40)+`"}`, 24)
	f.Add(`["`+strings.Repeat("x", 100)+`",{"`+strings.Repeat("k", 100)+`":1}]`, 10)
	f.Add(`"\\\\\\\\\\\\\\\\\\\\\\\\"`, 3)
	f.Add(`{"a" : "\ud800\ud800\ud800\ud800 tail", "b":[true,null,1.5e3]}`, 6)
	f.Fuzz(func(t *testing.T, doc string, max int) {
		if !json.Valid([]byte(doc)) || max < 1 || max > 1<<16 {
			return
		}
		out, changed := ShortenStrings([]byte(doc), max)
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		if !changed && string(out) != doc {
			t.Fatalf("unchanged but different: %s", out)
		}
		var long, short any
		if err := json.Unmarshal([]byte(doc), &long); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &short); err != nil {
			t.Fatal(err)
		}
		sameShape(t, long, short, max)
	})
}

func TestShortenStringsLeavesSmallAlone(t *testing.T) {
	doc := []byte(`{"path":"a.txt","content":"short"}`)
	if out, changed := ShortenStrings(doc, 16); changed || &out[0] != &doc[0] {
		t.Errorf("a document without long strings was copied: %s", out)
	}
}
