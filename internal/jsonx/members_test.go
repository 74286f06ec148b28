package jsonx

import (
	"encoding/json"
	"reflect"
	"testing"
)

// memberArgs has a field of each kind the helpers read, decoded the way a
// tool's arguments would be.
type memberArgs struct {
	Name  string   `json:"name,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	Count int      `json:"count,omitempty"`
	All   bool     `json:"all,omitempty"`
	Show  *bool    `json:"show,omitempty"`
}

func (a *memberArgs) DecodeMember(key, val []byte) bool {
	if IsNull(val) {
		switch string(key) {
		case "name", "tags", "count", "all", "show":
			return true
		}
		return false
	}
	var ok bool
	switch string(key) {
	case "name":
		a.Name, ok = String(val)
	case "tags":
		a.Tags, ok = Strings(val)
	case "count":
		a.Count, ok = Int(val)
	case "all":
		a.All, ok = Bool(val)
	case "show":
		var b bool
		if b, ok = Bool(val); ok {
			a.Show = &b
		}
	}
	return ok
}

// agreesWithStd fails t when DecodeMembers takes doc to another value than
// encoding/json makes of it, and reports whether it took it.
func agreesWithStd(t *testing.T, doc string) bool {
	t.Helper()
	var fast memberArgs
	if !DecodeMembers([]byte(doc), &fast) {
		return false
	}
	var want memberArgs
	if err := json.Unmarshal([]byte(doc), &want); err != nil || !reflect.DeepEqual(fast, want) {
		t.Fatalf("%q: %#v, want %#v (%v)", doc, fast, want, err)
	}
	return true
}

func TestDecodeMembers(t *testing.T) {
	for _, c := range []struct {
		doc  string
		fast bool // DecodeMembers takes it (else encoding/json must)
	}{
		{`{"name":"a.txt"}`, true},
		{` { "name" : "a.txt" , "count" : 3 } `, true},
		{`{}`, true},
		{`{"name":"","tags":[],"count":-12,"all":true,"show":false}`, true},
		{`{"tags":["a", "b" ,"c"],"show":true}`, true},
		{`{"name":"界 😀","tags":["é"]}`, true},
		{`{"name":null,"tags":null,"count":null,"all":null,"show":null}`, true},
		{`{"count":0}`, true},
		{`{"count":-0}`, true},
		{`{"count":9223372036854775807}`, true},
		{`{"count":9223372036854775808}`, false}, // beyond int
		{`{"count":1.0}`, false},
		{`{"count":1e2}`, false},
		{`{"count":01}`, false},
		{`{"count":"1"}`, false},
		{`{"count":+1}`, false},
		{`{"count":-}`, false},
		{`{"name":1}`, false},
		{`{"name":"a\"b"}`, false}, // escapes: encoding/json
		{`{"name":"a\u00e9"}`, false},
		{"{\"name\":\"bad \xff\"}", false},
		{"{\"name\":\"ctl \x01\"}", false},
		{`{"tags":["a",1]}`, false},
		{`{"tags":["a",]}`, false},
		{`{"tags":[null]}`, false},
		{`{"all":"true"}`, false},
		{`{"all":tru}`, false},
		{`{"Name":"a"}`, false},            // another spelling
		{`{"name":"a","NAME":"b"}`, false}, // given twice, in any case
		{`{"name":"a","name":"b"}`, false},
		{`{"other":1}`, false},
		{`{"name":"a"} x`, false},
		{`{"name":"a",}`, false},
		{`{"name" "a"}`, false},
		{`{"name":"a"`, false},
		{`{"name":{"x":1}}`, false},
		{`[]`, false},
		{``, false},
		{`"x"`, false},
	} {
		if got := agreesWithStd(t, c.doc); got != c.fast {
			t.Errorf("%q: taken %v, want %v", c.doc, got, c.fast)
		}
	}
}

func TestMemberHelpersStandAlone(t *testing.T) {
	if _, ok := String([]byte(`"a\"b"`)); ok {
		t.Error(`String took an escape`)
	}
	if _, ok := Strings([]byte(`"a"`)); ok {
		t.Error(`Strings took a string`)
	}
	if _, ok := Int([]byte(`007`)); ok {
		t.Error(`Int took a leading zero`)
	}
	if s, ok := Strings([]byte(`[]`)); !ok || s == nil {
		t.Errorf("Strings([]) = %#v, %v; want an empty slice", s, ok)
	}
}

func FuzzDecodeMembers(f *testing.F) {
	for _, s := range []string{
		`{"name":"a.txt","count":1}`, `{"tags":["a","b"],"show":true,"all":false}`,
		`{"name":null,"count":-0}`, `{"count":1e2}`, `{"name":"a","NAME":"b"}`, `{"tags":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		agreesWithStd(t, doc)
	})
}
