package audit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/callinfo"
)

// TestEncodeMatchesMarshal: the hand-written encoder makes what
// json.Marshal (without HTML escaping) makes, for every kind of field.
func TestEncodeMatchesMarshal(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 30, 0, 123456789, time.UTC)
	weird := "quote \" backslash \\ nl \n cr \r tab \t bell \x07 nul \x00 del \x7f <html>&amp; 界 \u2028 \u2029 bad \xff\xfe end"
	cases := []Record{
		{},
		{CallID: "c1", ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`), Timestamp: ts, Status: "success", Result: "hello\n", ResultLength: 6},
		{CallID: "c2", ToolName: "exec", Arguments: json.RawMessage("{\n  \"command\": \"ls\",\n  \"n\": [1, 2.5e3, null, true]\n}"), Replica: "toolsvc-0",
			Facts: callinfo.Facts{SessionID: weird, Source: "feishu", Key: "alice", Channel: "feishu:ops", ChatID: weird, ReplyTo: "om_1",
				RequestID: "req-7", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
			Timestamp: ts.Add(-123456789), Status: "error", DurationMS: 1234, Result: weird, ResultTruncated: true, ResultLength: 99999, ErrorCode: "timeout", ArgumentsTruncated: true},
		{CallID: "c3", Arguments: `{"path": "trunc` + weird, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Status: StatusStarted},
		{CallID: "c4", Arguments: map[string]any{"k": []any{"v", 1.5}}, Timestamp: ts.Add(500 * time.Millisecond), Status: StatusInterrupted, ErrorCode: CodeInterrupted},
		{CallID: "c5", Arguments: json.RawMessage(`"just a string"`), Timestamp: ts, Result: strings.Repeat("ab", 3000)},
		{CallID: "c6", ToolName: "exec", Facts: callinfo.Facts{Key: "carol"}, Timestamp: ts, Status: "error", ErrorCode: "rate_limited", Decision: "rate_limited"},
		{Seq: 12, Prev: genesisHash, CallID: "c8", ToolName: "exec", Timestamp: ts, Status: "success"},
		{CallID: "c7", ToolName: "exec", Facts: callinfo.Facts{Key: "carol"}, Timestamp: ts, Status: "success",
			Approval: &Approval{ID: "ap-1", Outcome: "approved", ArgumentsSHA256: "ab12", DecidedBy: "ops", DecidedAt: &ts, Reason: "ok <&> " + weird}},
	}
	for _, rec := range cases {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
		got, err := appendRecord(nil, &rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want.String() {
			t.Errorf("record %s:\n got %s\nwant %s", rec.CallID, got, want.String())
		}
		if bytes.Count(got, []byte("\n")) != 1 {
			t.Errorf("record %s is not one line: %q", rec.CallID, got)
		}
	}
	bad := Record{Arguments: json.RawMessage(`{"unclosed":`)}
	if _, err := appendRecord(nil, &bad); err == nil {
		t.Error("invalid raw arguments encoded")
	}
}

// TestRecordFieldNames: a record holds the field names readers of the
// audit log depend on, unchanged, and one for every field of the call's
// facts (callinfo.Facts): a fact added there is recorded without a change
// here.
func TestRecordFieldNames(t *testing.T) {
	rec := Record{Seq: 7, Prev: genesisHash, CallID: "c", ToolName: "t", Arguments: json.RawMessage(`{}`), ArgumentsTruncated: true, Replica: "r",
		Timestamp: time.Now().UTC(), Status: "error", DurationMS: 1, Result: "x", ResultTruncated: true, ResultLength: 1, ErrorCode: "e"}
	want := []string{"seq", "prev", "call_id", "tool_name", "arguments", "arguments_truncated", "session_id", "source", "key", "replica",
		"timestamp", "status", "duration_ms", "result", "result_truncated", "result_length", "error_code"}
	facts := reflect.ValueOf(&rec.Facts).Elem()
	for i := range facts.NumField() {
		facts.Field(i).SetString("v")
		name, _, _ := strings.Cut(facts.Type().Field(i).Tag.Get("json"), ",")
		if name == "-" { // a fact the gate keeps for itself
			continue
		}
		if !slices.Contains(want, name) {
			want = append(want, name)
		}
	}
	line, err := appendRecord(nil, &rec)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("the record has no %q: %s", name, line)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the record has %d fields, want %d: %s", len(got), len(want), line)
	}
}

// TestAppendRFC3339Nano: the written-out format is AppendFormat's, for the
// times it handles and the ones it leaves to AppendFormat.
func TestAppendRFC3339Nano(t *testing.T) {
	times := []time.Time{
		time.Date(2026, 12, 5, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 500000000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 120000, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600)),
		time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("Y", 0)),
		{},
	}
	for i := int64(0); i < 1000; i++ {
		times = append(times, time.Unix(i*7919*86400+i*104729, i*999983%1e9).UTC())
	}
	for _, tm := range times {
		want := tm.AppendFormat([]byte("x"), time.RFC3339Nano)
		if got := appendRFC3339Nano([]byte("x"), tm); string(got) != string(want) {
			t.Errorf("appendRFC3339Nano(%v) = %s, want %s", tm, got, want)
		}
	}
}
