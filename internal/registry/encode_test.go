package registry

import (
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/jsonx"
)

// TestResultAppendJSONMatchesMarshal: the hand-written encoder makes what
// jsonx.Marshal makes, with and without every optional field.
func TestResultAppendJSONMatchesMarshal(t *testing.T) {
	weird := "quote \" backslash \\ nl \n tab \t nul \x00 <html>&amp; 界 \u2028 bad \xff end"
	zero, code := 0, -1
	expires := time.Date(2026, 12, 7, 8, 9, 10, 123456000, time.UTC)
	for _, res := range []Result{
		{},
		{CallID: "c1", Tool: "read_file", Status: StatusSuccess, Result: "[File: a.txt]\n  1| hi", DurationMS: 3},
		{CallID: "c2", Tool: "exec", Status: StatusSuccess, Result: weird, ExitCode: &zero},
		{CallID: "c3", Tool: "exec", Status: StatusSuccess, Result: "", ExitCode: &code, DurationMS: -5},
		Failed("write_file", "invalid_arguments", weird),
		{CallID: weird, Tool: weird, Status: StatusError, Result: "Error: x", Error: &ErrorBody{}, ExitCode: &zero, DurationMS: 1 << 40},
		{CallID: "c4", Tool: "exec", Status: StatusApprovalRequired, Result: weird, ApprovalID: "ap-1", ArgumentsSHA256: "ab", Summary: weird, ExpiresAt: &expires},
	} {
		want, err := jsonx.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got[1:], want)
		}
	}
}
