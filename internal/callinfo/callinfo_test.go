package callinfo

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fields returns Facts' fields, failing the test for one that is not a
// string: Clean and AppendJSON handle strings only.
func fields(t *testing.T) []reflect.StructField {
	t.Helper()
	var out []reflect.StructField
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Facts]()) {
		if f.Type.Kind() != reflect.String {
			t.Fatalf("Facts.%s is a %s: Clean and AppendJSON handle strings only", f.Name, f.Type)
		}
		out = append(out, f)
	}
	return out
}

// withEach returns Facts with the named fields set to v.
func withEach(names []string, v string) Facts {
	var f Facts
	rv := reflect.ValueOf(&f).Elem()
	for _, n := range names {
		rv.FieldByName(n).SetString(v)
	}
	return f
}

func marshal(t *testing.T, f Facts) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// TestAppendJSONMatchesMarshal: AppendJSON writes what json.Marshal
// (without HTML escaping) writes, for no field set, every field set, and
// each field alone: a field added to Facts and not to AppendJSON, which
// would be missing from audit records, fails here.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	var all []string
	for _, f := range fields(t) {
		all = append(all, f.Name)
	}
	cases := [][]string{nil, all}
	for _, n := range all {
		cases = append(cases, []string{n})
	}
	for _, names := range cases {
		f := withEach(names, "v <&> \"q\" \u2028 \x7f é")
		got := "{" + strings.TrimPrefix(string(f.AppendJSON(nil)), ",") + "}"
		if want := marshal(t, f); got != want {
			t.Errorf("fields %v:\n got %s\nwant %s", names, got, want)
		}
	}
}

// TestCleanEveryCallerField: Clean passes every field but Key and
// Workspace (the operator's names) and SpanID (the service's) through the
// function, and leaves empty fields alone.
func TestCleanEveryCallerField(t *testing.T) {
	var all []string
	for _, f := range fields(t) {
		all = append(all, f.Name)
	}
	calls := 0
	got := withEach(all, "the-secret").Clean(func(s string) string {
		calls++
		return strings.ReplaceAll(s, "secret", "[R]")
	})
	rv := reflect.ValueOf(got)
	for _, n := range all {
		v := rv.FieldByName(n).String()
		if want := map[bool]string{true: "the-secret", false: "the-[R]"}[n == "Key" || n == "Workspace" || n == "SpanID"]; v != want {
			t.Errorf("%s = %q after Clean, want %q", n, v, want)
		}
	}
	calls = 0
	if (Facts{Key: "k"}).Clean(func(s string) string { calls++; return s }); calls != 0 {
		t.Errorf("Clean called the function %d times for empty fields", calls)
	}
}
