package registry

import (
	"strconv"
	"time"

	"github.com/countbot/toolsvc/internal/jsonx"
)

// AppendJSON appends res as JSON, the same document jsonx.Marshal makes of
// it, written out by hand: every call's answer is encoded, and reflection
// was a good part of what encoding cost. TestResultAppendJSONMatchesMarshal
// holds the two together.
func (res *Result) AppendJSON(b []byte) []byte {
	b = append(b, `{"call_id":`...)
	b = jsonx.AppendString(b, res.CallID)
	b = append(b, `,"tool":`...)
	b = jsonx.AppendString(b, res.Tool)
	b = append(b, `,"status":`...)
	b = jsonx.AppendString(b, res.Status)
	b = append(b, `,"result":`...)
	b = jsonx.AppendString(b, res.Result)
	if e := res.Error; e != nil {
		b = append(b, `,"error":{"code":`...)
		b = jsonx.AppendString(b, e.Code)
		b = append(b, `,"message":`...)
		b = jsonx.AppendString(b, e.Message)
		b = append(b, '}')
	}
	if res.ExitCode != nil {
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(*res.ExitCode), 10)
	}
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, res.DurationMS, 10)
	if res.ApprovalID != "" {
		b = append(b, `,"approval_id":`...)
		b = jsonx.AppendString(b, res.ApprovalID)
	}
	if res.ArgumentsSHA256 != "" {
		b = append(b, `,"arguments_sha256":`...)
		b = jsonx.AppendString(b, res.ArgumentsSHA256)
	}
	if res.Summary != "" {
		b = append(b, `,"summary":`...)
		b = jsonx.AppendString(b, res.Summary)
	}
	if res.ExpiresAt != nil {
		b = append(b, `,"expires_at":"`...)
		b = res.ExpiresAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}
