package toolerr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestErrorf(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "a.txt", Err: fs.ErrNotExist}
	tests := []struct {
		name      string
		err       error
		code, msg string
		is        error // errors.Is(err, is) must hold, when set
	}{
		{"plain", Errorf(Busy, "%d running. Next: retry.", 3), Busy, "3 running. Next: retry.", nil},
		{"wrapped cause", Errorf(ToolError, "cannot read: %w", cause), ToolError, "cannot read: open a.txt: file does not exist", fs.ErrNotExist},
		{"two causes", Errorf(Timeout, "%w and %w", context.DeadlineExceeded, cause), Timeout, "context deadline exceeded and open a.txt: file does not exist", fs.ErrNotExist},
		{"verb v keeps no chain", Errorf(ToolError, "cannot read: %v", cause), ToolError, "cannot read: open a.txt: file does not exist", nil},
		{"literal", &Error{Code: NotFound, Message: "'a' does not exist.", Err: cause}, NotFound, "'a' does not exist.", fs.ErrNotExist},
		{"wrapped by fmt", fmt.Errorf("outer: %w", Errorf(PathDenied, "inner")), PathDenied, "inner", nil},
		{"no code", errors.New("boom"), ToolError, "boom", nil},
		{"nil", nil, "", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ErrorCode(tc.err); got != tc.code {
				t.Errorf("ErrorCode = %q, want %q", got, tc.code)
			}
			if got := ErrorMessage(tc.err); got != tc.msg {
				t.Errorf("ErrorMessage = %q, want %q", got, tc.msg)
			}
			if tc.is != nil && !errors.Is(tc.err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.is)
			}
			if tc.name == "verb v keeps no chain" && errors.Is(tc.err, fs.ErrNotExist) {
				t.Errorf("%%v kept the chain")
			}
		})
	}
	var e *Error
	if err := Errorf(Busy, "x"); !errors.As(err, &e) || e.Error() != "x" || e.Unwrap() != nil {
		t.Errorf("Errorf without %%w: %#v", e)
	}
}

func TestCodesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes() {
		if c == "" || seen[c] {
			t.Errorf("code %q empty or listed twice", c)
		}
		seen[c] = true
	}
	c := Codes()
	c[0] = "changed"
	if Codes()[0] == "changed" {
		t.Error("Codes returns the package's own array")
	}
}

// TestOpenAPIListsTheCodes holds api/openapi.yaml to this package's list,
// both ways: a code the contract lists must exist here, and every code here
// must be in the contract, so that a client validating responses against
// it accepts every error the service sends.
func TestOpenAPIListsTheCodes(t *testing.T) {
	data, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	// A call through the registry never ends in DuplicateCall; the
	// sub-agent's record of its calls may.
	invokeCodes := slices.DeleteFunc(Codes(), func(c string) bool { return c == DuplicateCall })
	tests := []struct {
		where string
		path  []any
		want  []string
	}{
		{"Result error.code", []any{"components", "schemas", "Result", "properties", "error", "properties", "code", "enum"}, invokeCodes},
		{"AgentTask tool_calls[].error_code", []any{"components", "schemas", "AgentTask", "allOf", 1, "properties", "tool_calls", "items", "properties", "error_code", "enum"}, Codes()},
	}
	for _, tc := range tests {
		t.Run(tc.where, func(t *testing.T) {
			var node any = doc
			for _, step := range tc.path {
				switch s := step.(type) {
				case string:
					m, ok := node.(map[string]any)
					if !ok {
						t.Fatalf("api/openapi.yaml: no %q in %v", s, tc.path)
					}
					node = m[s]
				case int:
					l, ok := node.([]any)
					if !ok || s >= len(l) {
						t.Fatalf("api/openapi.yaml: no item %d in %v", s, tc.path)
					}
					node = l[s]
				}
			}
			list, ok := node.([]any)
			if !ok {
				t.Fatalf("api/openapi.yaml: %v is not a list: %#v", tc.path, node)
			}
			var got []string
			for _, v := range list {
				got = append(got, fmt.Sprint(v))
			}
			for _, c := range got {
				if !slices.Contains(tc.want, c) {
					t.Errorf("api/openapi.yaml lists %q, which toolerr does not have", c)
				}
			}
			for _, c := range tc.want {
				if !slices.Contains(got, c) {
					t.Errorf("api/openapi.yaml does not list %q", c)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("api/openapi.yaml lists %d codes (%v), toolerr %d", len(got), got, len(tc.want))
			}
		})
	}
}
