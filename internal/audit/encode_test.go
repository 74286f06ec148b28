package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestEncodeMatchesMarshal: the hand-written encoder makes what
// json.Marshal (without HTML escaping) makes, for every kind of field.
func TestEncodeMatchesMarshal(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 30, 0, 123456789, time.UTC)
	weird := "quote \" backslash \\ nl \n cr \r tab \t bell \x07 nul \x00 del \x7f <html>&amp; 界 \u2028 \u2029 bad \xff\xfe end"
	cases := []Record{
		{},
		{CallID: "c1", ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`), Timestamp: ts, Status: "success", Result: "hello\n", ResultLength: 6},
		{CallID: "c2", ToolName: "exec", Arguments: json.RawMessage("{\n  \"command\": \"ls\",\n  \"n\": [1, 2.5e3, null, true]\n}"), SessionID: weird, Source: "feishu", Key: "alice", Replica: "toolsvc-0",
			Timestamp: ts.Add(-123456789), Status: "error", DurationMS: 1234, Result: weird, ResultTruncated: true, ResultLength: 99999, ErrorCode: "timeout", ArgumentsTruncated: true},
		{CallID: "c3", Arguments: `{"path": "trunc` + weird, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Status: StatusStarted},
		{CallID: "c4", Arguments: map[string]any{"k": []any{"v", 1.5}}, Timestamp: ts.Add(500 * time.Millisecond), Status: StatusInterrupted, ErrorCode: CodeInterrupted},
		{CallID: "c5", Arguments: json.RawMessage(`"just a string"`), Timestamp: ts, Result: strings.Repeat("ab", 3000)},
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
