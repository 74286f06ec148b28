package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/countbot/toolsvc/internal/jsonx"
)

// appendRecord appends rec as one line of JSON, the same document
// json.Marshal makes of it (without its HTML escaping), written out by
// hand: the log encodes two records per call, and reflection was a good
// part of its cost. TestEncodeMatchesMarshal holds the two together.
func appendRecord(b []byte, rec *Record) ([]byte, error) {
	b, _, err := appendRecordArgs(b, rec)
	return b, err
}

// encodedArgs are arguments as appendRecord encoded them for a call's
// journal line, kept by Start so that Finish appends them as they are
// rather than encoding them again.
type encodedArgs []byte

// appendRecordArgs is appendRecord, which also returns the encoded
// arguments (a part of the returned slice).
func appendRecordArgs(b []byte, rec *Record) ([]byte, encodedArgs, error) {
	b = appendPlace(b, rec)
	b = jsonx.AppendString(b, rec.CallID)
	b = append(b, `,"tool_name":`...)
	b = jsonx.AppendString(b, rec.ToolName)
	b = append(b, `,"arguments":`...)
	argsAt := len(b)
	switch a := rec.Arguments.(type) {
	case encodedArgs:
		b = append(b, a...)
	case json.RawMessage:
		if len(a) == 0 {
			b = append(b, "null"...)
			break
		}
		// Compact, as json.Marshal does: a journal line must not hold a
		// newline, and pretty-printed arguments have them between tokens.
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, a); err != nil {
			return nil, nil, err
		}
		b = buf.Bytes()
	case string:
		b = jsonx.AppendString(b, a)
	case nil:
		b = append(b, "null"...)
	default:
		data, err := json.Marshal(a)
		if err != nil {
			return nil, nil, err
		}
		b = append(b, data...)
	}
	args := encodedArgs(b[argsAt:len(b):len(b)])
	if rec.ArgumentsTruncated {
		b = append(b, `,"arguments_truncated":true`...)
	}
	b = rec.Facts.AppendJSON(b)
	if rec.Replica != "" {
		b = append(b, `,"replica":`...)
		b = jsonx.AppendString(b, rec.Replica)
	}
	b = append(b, `,"timestamp":"`...)
	b = appendRFC3339Nano(b, rec.Timestamp)
	b = append(b, `","status":`...)
	b = jsonx.AppendString(b, rec.Status)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, rec.DurationMS, 10)
	b = append(b, `,"result":`...)
	b = jsonx.AppendString(b, rec.Result)
	b = append(b, `,"result_truncated":`...)
	b = strconv.AppendBool(b, rec.ResultTruncated)
	b = append(b, `,"result_length":`...)
	b = strconv.AppendInt(b, int64(rec.ResultLength), 10)
	if rec.ErrorCode != "" {
		b = append(b, `,"error_code":`...)
		b = jsonx.AppendString(b, rec.ErrorCode)
	}
	if rec.Decision != "" {
		b = append(b, `,"decision":`...)
		b = jsonx.AppendString(b, rec.Decision)
	}
	if rec.Approval != nil {
		// Rare (a call that needed a person): encoded the plain way.
		ap, err := jsonx.Marshal(rec.Approval)
		if err != nil {
			return nil, args, err
		}
		b = append(b, `,"approval":`...)
		b = append(b, ap...)
	}
	return append(b, '}', '\n'), args, nil
}

// appendPlace opens a record: its place in the chain when it has one,
// then the name of its call ID. (Final records are sealed by the chain,
// which writes their place itself; this serves json.Marshal's form.)
func appendPlace(b []byte, rec *Record) []byte {
	if rec.Seq == 0 {
		return append(b, `{"call_id":`...)
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, rec.Seq, 10)
	if rec.Prev != "" {
		b = append(b, `,"prev":`...)
		b = jsonx.AppendString(b, rec.Prev)
	}
	return append(b, `,"call_id":`...)
}

// appendRFC3339Nano is t.AppendFormat(b, time.RFC3339Nano), written out for
// the UTC times of years 0-9999 that records have (two per call); other
// times are left to AppendFormat.
func appendRFC3339Nano(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if t.Location() != time.UTC || year < 0 || year > 9999 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	hour, min, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, min, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	if ns := t.Nanosecond(); ns != 0 {
		// The fraction without its trailing zeros, as ".999999999" does.
		b = append(b, '.')
		b = appendDigits(b, ns, 9)
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return append(b, 'Z')
}
