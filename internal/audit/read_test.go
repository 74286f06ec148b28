package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func decodeNumbers(t *testing.T, doc string) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAppendCleanMatchesClean: cleaning the caller's decoded arguments
// without changing them gives, byte for byte, what decoding, cleaning and
// json.Marshal give, and leaves the value as it was.
func TestAppendCleanMatchesClean(t *testing.T) {
	docs := []string{
		`{"path":"a.txt","content":"0123456789abcdef","api_key":"abc","nested":{"Password":"hunter2","n":[1,2.50,-3e2]}}`,
		`{"z":1,"a":2,"M":3,"é":4,"a b":5}`,
		`{"html":"<b>&amp;</b>","sep":"\u2028\u2029","ctl":"\u0001\t\n","emoji":"😀😀😀😀😀😀😀😀😀😀"}`,
		`{"list":[{"token":"t"},{"x":"yyyyyyyyyyyy"}],"empty":{},"none":[],"null":null,"t":true,"f":false}`,
		`{"a":1,"a":"second"}`, `[1,"two",{"secret":3}]`, `"just a long string value"`, `null`, `{}`,
	}
	for _, max := range []int{3, 8, 4000} {
		l := &Log{opts: Options{MaxArgChars: max}}
		for _, doc := range docs {
			var oldCut, newCut bool
			want, err := json.Marshal(l.clean(decodeNumbers(t, doc), &oldCut))
			if err != nil {
				t.Fatal(err)
			}
			v := decodeNumbers(t, doc)
			got := l.appendClean(nil, v, &newCut)
			if !bytes.Equal(got, want) || newCut != oldCut {
				t.Errorf("max %d, %s:\n got %s (cut %v)\nwant %s (cut %v)", max, doc, got, newCut, want, oldCut)
			}
			if !reflect.DeepEqual(v, decodeNumbers(t, doc)) {
				t.Errorf("max %d, %s: the value was changed", max, doc)
			}
		}
	}
}

// TestReadArgumentsNotReadAgain: arguments handed over with what the
// caller's reading found are recorded from that, not read again: the
// compact form as given, cut and blanked from the value given. (The
// mismatches below would show any reading of JSON by the log.)
func TestReadArgumentsNotReadAgain(t *testing.T) {
	l := newLog(t, Options{MaxArgChars: 12})
	cases := []struct {
		name string
		args ReadArguments
		want string
		cut  bool
	}{
		{"small, no secret names: the compact form", ReadArguments{JSON: json.RawMessage(`{ "a" : 1 }`), Compact: []byte(`{"a":2}`)}, `{"a":2}`, false},
		{"secret names: cleaned from the value", ReadArguments{JSON: json.RawMessage(`{"token":"from JSON"}`), Compact: []byte(`{"token":"from JSON"}`),
			Value: map[string]any{"token": "x", "b": "from the value"}, SecretNames: true}, `{"b":"from the val","token":"[REDACTED]"}`, true},
		{"big: cleaned from the value", ReadArguments{JSON: json.RawMessage(`{"content":"from JSON, long"}`), Compact: []byte(`{"content":"from JSON, long"}`),
			Value: map[string]any{"c": "value"}}, `{"c":"value"}`, false},
		{"no value: JSON decoded", ReadArguments{JSON: json.RawMessage(`{"content":"from JSON, long"}`), Compact: []byte(`{"content":"from JSON, long"}`)},
			`{"content":"from JSON, l"}`, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := Record{CallID: "read" + string(rune('a'+i)), ToolName: "t", Timestamp: time.Now(), Arguments: tc.args}
			st, err := l.Start(rec)
			if err != nil {
				t.Fatal(err)
			}
			// The caller's checks may change the value once Start has
			// returned: Finish takes the arguments Start recorded.
			if tc.args.Value != nil {
				tc.args.Value.(map[string]any)["changed"] = "since"
			}
			rec.Arguments, rec.Status = tc.args, "success"
			if err := l.Finish(st, rec); err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(readRecord(t, l.Dir(), rec).Arguments)
			if err != nil {
				t.Fatal(err)
			}
			if got := readRecord(t, l.Dir(), rec); string(data) != tc.want || got.ArgumentsTruncated != tc.cut {
				t.Errorf("recorded %s (cut %v), want %s (cut %v)", data, got.ArgumentsTruncated, tc.want, tc.cut)
			}
		})
	}
}

// TestReadArgumentsWithoutJournalLine: when Start could not note the call
// (the journal failed), Finish cleans the arguments from JSON, not from
// the caller's value, which may have changed since.
func TestReadArgumentsWithoutJournalLine(t *testing.T) {
	l := newLog(t, Options{MaxArgChars: 12})
	l.inject = func(op string) error {
		if op == "journal" {
			return errors.New("injected")
		}
		return nil
	}
	value := map[string]any{"token": "x"}
	rec := Record{CallID: "nojournal", ToolName: "t", Timestamp: time.Now(), Arguments: ReadArguments{
		JSON: json.RawMessage(`{"token":"from JSON"}`), Compact: []byte(`{"token":"from JSON"}`), Value: value, SecretNames: true}}
	st, err := l.Start(rec)
	if err == nil {
		t.Fatal("the injected journal fault did not fail Start")
	}
	value["token"], value["changed"] = "changed", "since"
	rec.Status = "success"
	if err := l.Finish(st, rec); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(readRecord(t, l.Dir(), rec).Arguments)
	if string(data) != `{"token":"[REDACTED]"}` {
		t.Errorf("recorded %s", data)
	}
}
