package tools

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/registry"
)

// reflectedReadFileArgs is readFileArgs without its DecodeMember: what
// registry.Decode made of read_file's arguments through encoding/json.
type reflectedReadFileArgs readFileArgs

// readFileDecodeAgrees fails t when read_file's arguments decode otherwise
// (value or error) with the fast path than through encoding/json, and
// reports whether the fast path took doc.
func readFileDecodeAgrees(t *testing.T, doc string) bool {
	t.Helper()
	got, err := registry.Decode[readFileArgs](json.RawMessage(doc))
	want, wantErr := registry.Decode[reflectedReadFileArgs](json.RawMessage(doc))
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(reflectedReadFileArgs(got), want) {
		t.Fatalf("%q: %#v, %v; want %#v, %v", doc, got, err, want, wantErr)
	}
	var fast readFileArgs
	return jsonx.DecodeMembers([]byte(doc), &fast)
}

func TestReadFileArgsDecodeAgrees(t *testing.T) {
	for _, c := range []struct {
		doc  string
		fast bool
	}{
		{`{"path":"small.txt"}`, true},
		{`{"path":"a.txt","start_line":3,"end_line":40,"show_line_numbers":false}`, true},
		{`{"paths":["a.txt","b/c.md"],"show_line_numbers":true}`, true},
		{`{"paths":[],"path":null,"start_line":null,"show_line_numbers":null}`, true},
		{`{"path":"ünïcode/файл.txt"}`, true},
		{`{"start_line":3.0,"path":"a"}`, false}, // integral, written as a float: encoding/json's path
		{`{"start_line":1e400,"path":"a"}`, false},
		{`{"start_line":99999999999999999999,"path":"a"}`, false},
		{`{"path":"tab\there"}`, false},
		{`{"Path":"a.txt"}`, false},
		{`{"path":"a","other":true}`, false},
		{`{"path":7}`, false},
		{`{"paths":"a"}`, false},
		{`{"show_line_numbers":"yes"}`, false},
		{`not json`, false},
	} {
		if got := readFileDecodeAgrees(t, c.doc); got != c.fast {
			t.Errorf("%q: fast path taken %v, want %v", c.doc, got, c.fast)
		}
	}
}

func FuzzReadFileArgsDecode(f *testing.F) {
	for _, s := range []string{
		`{"path":"small.txt"}`, `{"path":"a","start_line":2,"end_line":9,"show_line_numbers":false}`,
		`{"paths":["a","b"]}`, `{"paths":null,"start_line":-0}`, `{"start_line":2.0}`, `{"PATH":"a"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		readFileDecodeAgrees(t, doc)
	})
}
