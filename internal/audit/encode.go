package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendRecord appends rec as one line of JSON, the same document
// json.Marshal makes of it (without its HTML escaping), written out by
// hand: the log encodes two records per call, and reflection was a good
// part of its cost. TestEncodeMatchesMarshal holds the two together.
func appendRecord(b []byte, rec *Record) ([]byte, error) {
	b = append(b, `{"call_id":`...)
	b = appendString(b, rec.CallID)
	b = append(b, `,"tool_name":`...)
	b = appendString(b, rec.ToolName)
	b = append(b, `,"arguments":`...)
	switch a := rec.Arguments.(type) {
	case json.RawMessage:
		if len(a) == 0 {
			b = append(b, "null"...)
			break
		}
		// Compact, as json.Marshal does: a journal line must not hold a
		// newline, and pretty-printed arguments have them between tokens.
		var buf bytes.Buffer
		if err := json.Compact(&buf, a); err != nil {
			return nil, err
		}
		b = append(b, buf.Bytes()...)
	case string:
		b = appendString(b, a)
	case nil:
		b = append(b, "null"...)
	default:
		data, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		b = append(b, data...)
	}
	if rec.ArgumentsTruncated {
		b = append(b, `,"arguments_truncated":true`...)
	}
	b = append(b, `,"session_id":`...)
	b = appendString(b, rec.SessionID)
	if rec.Source != "" {
		b = append(b, `,"source":`...)
		b = appendString(b, rec.Source)
	}
	if rec.Key != "" {
		b = append(b, `,"key":`...)
		b = appendString(b, rec.Key)
	}
	if rec.Replica != "" {
		b = append(b, `,"replica":`...)
		b = appendString(b, rec.Replica)
	}
	b = append(b, `,"timestamp":"`...)
	b = rec.Timestamp.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","status":`...)
	b = appendString(b, rec.Status)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, rec.DurationMS, 10)
	b = append(b, `,"result":`...)
	b = appendString(b, rec.Result)
	b = append(b, `,"result_truncated":`...)
	b = strconv.AppendBool(b, rec.ResultTruncated)
	b = append(b, `,"result_length":`...)
	b = strconv.AppendInt(b, int64(rec.ResultLength), 10)
	if rec.ErrorCode != "" {
		b = append(b, `,"error_code":`...)
		b = appendString(b, rec.ErrorCode)
	}
	return append(b, '}', '\n'), nil
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// with HTML escaping off: invalid UTF-8 becomes U+FFFD, and U+2028 and
// U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
