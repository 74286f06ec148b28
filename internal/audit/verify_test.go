package audit

import "testing"

// TestParseEntryCutShort: a record cut anywhere, inside an escape or a
// number included (where the decoder names a bad character at the very
// end rather than the end of the input), is truncated, never edited.
func TestParseEntryCutShort(t *testing.T) {
	rec := `{"seq":7,"prev":"00","call_id":"c-1","arguments":{"command":"echo \u00e9 \"q\" \\ x","n":[1.25,-0.5e-3]},"result":"a\nb"}` + "\n"
	for i := 1; i < len(rec)-1; i++ {
		if e := parseEntry("f.json", []byte(rec[:i])); e.damage != KindTruncated {
			t.Errorf("cut to %d bytes (%q): damage %q, want %q", i, rec[max(0, i-10):i], e.damage, KindTruncated)
		}
	}
}

// TestParseEntryEditedEnd: a whole record whose last byte was changed is
// edited, not cut short.
func TestParseEntryEditedEnd(t *testing.T) {
	if e := parseEntry("f.json", []byte(`{"seq":7,"call_id":"c-1"}X`)); e.damage != KindEdited {
		t.Errorf("damage %q, want %q", e.damage, KindEdited)
	}
}
