package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/xeipuuv/gojsonschema"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Bounds of an invalid-arguments message: a model reads it, and arguments
// built to produce thousands of problems must not produce a huge result.
const (
	maxProblems     = 10   // problems listed; the rest are counted
	maxProblemChars = 200  // one problem, cut beyond
	maxMessageChars = 2000 // the whole list
	// maxNumberChars bounds one number literal. Longer ones, and exponents
	// beyond maxExponent, are refused before the schema library turns them
	// into exact fractions, which costs time and memory that grow with the
	// exponent.
	maxNumberChars = 400
	maxExponent    = 400
	// maxCollected bounds the problems kept while checking numbers, so that
	// a body of a million bad numbers costs no more than a few.
	maxCollected = 100
)

// problem is one thing wrong with a call's arguments: the parameter it
// concerns (a path such as "paths[1]", "" for the arguments as a whole) and
// the sentence a model reads, in the form "start_line must be >= 1".
type problem struct {
	field string
	text  string
}

// compileSchema checks that raw is a JSON Schema for an arguments object and
// compiles it once, at registration.
func compileSchema(raw json.RawMessage) (*gojsonschema.Schema, error) {
	var top struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON object: %w", err)
	}
	if top.Type != "object" {
		return nil, fmt.Errorf(`parameters must have "type": "object", got %q`, top.Type)
	}
	return gojsonschema.NewSchema(gojsonschema.NewBytesLoader(raw))
}

// checkArguments decides whether args can be handed to the tool. It returns
// the arguments to use (numbers with an integral value, such as 5.0 or 5e0,
// written as integers, so that they decode into Go int fields as JSON
// Schema's "integer" allows), or an error code and message. Every problem
// found (schema and cross-field rules) is listed, in a stable order.
func checkArguments(e *entry, tool string, args []byte) ([]byte, string, string) {
	return checkValidity(e, tool, args, json.Valid(args))
}

// checkValidity is checkArguments where whether args are JSON (valid) is
// known already.
func checkValidity(e *entry, tool string, args []byte, valid bool) ([]byte, string, string) {
	if !utf8.Valid(args) {
		return nil, toolerr.MalformedArguments, fmt.Sprintf("Tool call arguments for '%s' are not valid UTF-8 (the first bad byte is at offset %d). Next: %s",
			tool, firstInvalidUTF8(args), whatToSend(e))
	}
	if len(bytes.TrimFunc(args, unicode.IsSpace)) == 0 {
		return nil, toolerr.MalformedArguments, fmt.Sprintf("Tool call arguments for '%s' hold only whitespace (%d bytes), no JSON object. Next: %s",
			tool, len(args), whatToSend(e))
	}
	if !valid {
		msg := fmt.Sprintf("Tool call arguments for '%s' were truncated or malformed before execution (%s). Please regenerate the tool call with valid JSON arguments.",
			tool, jsonProblem(args))
		if h, ok := e.tool.(MalformedHinter); ok {
			msg += " " + h.MalformedHint()
		}
		return nil, toolerr.MalformedArguments, msg
	}
	return checkValue(e, tool, args, e.shortenAt)
}

// bigArguments is the size from which arguments are checked on a copy
// whose long strings are cut (entry.shortenAt), rather than decoded whole.
const bigArguments = 1 << 20

// checkValue is checkArguments once args are known to be valid JSON. When
// shortenAt is set and args are big, the schema and rules look at a copy
// of args with every string longer than shortenAt encoded bytes cut (to a
// prefix still longer than any length the schema states), which they
// judge as the whole: a 50 MB write_file is not decoded to be checked.
func checkValue(e *entry, tool string, args []byte, shortenAt int) ([]byte, string, string) {
	full, shortened := args, false
	if shortenAt > 0 && len(args) > bigArguments {
		args, shortened = jsonx.ShortenStrings(args, shortenAt)
	}
	// Plain arguments (no escapes) are read without encoding/json's
	// reflection; DecodeSimple makes the same value.
	v, ok := jsonx.DecodeSimple(args)
	if !ok {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, toolerr.MalformedArguments, fmt.Sprintf("Tool call arguments for '%s' could not be read (%v). Please regenerate the tool call with valid JSON arguments.", tool, err)
		}
	}
	return checkDecoded(e, tool, args, full, v, shortened)
}

// checkDecoded is checkValue once the arguments are decoded into v, which
// it may change: args are what was decoded, full the arguments the tool
// is to get (args, or the whole of which args is a cut copy when
// shortened).
func checkDecoded(e *entry, tool string, args, full []byte, v any, shortened bool) ([]byte, string, string) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, toolerr.InvalidArguments, fmt.Sprintf("Invalid parameters for tool '%s': arguments must be a JSON object, not %s. Next: %s", tool, jsonKind(v), whatToSend(e))
	}

	var nums problemList
	changed := e.nulls.drop(obj)
	changed = normalizeNumbers(obj, "", &nums) || changed
	if len(nums.list) > 0 {
		// Refused before the schema library sees the numbers.
		return nil, toolerr.InvalidArguments, formatProblems(tool, nums.list, nums.dropped)
	}
	var problems []problem
	if changed && shortened {
		// The numbers are written anew from the decoded value, which must
		// then hold the whole strings.
		return checkValue(e, tool, full, 0)
	}
	if changed {
		b, err := jsonx.Marshal(obj)
		if err != nil {
			return nil, toolerr.MalformedArguments, fmt.Sprintf("Tool call arguments for '%s' could not be read (%v). Please regenerate the tool call with valid JSON arguments.", tool, err)
		}
		args = b
	}
	// Arguments the fast form of the schema vouches for pass the library
	// too; the others are judged by the library, which words the problems.
	if e.fast == nil || !e.fast.accepts(v) {
		// The schema library is handed the value decoded above (numbers as
		// json.Number, as its own loaders decode them), not the bytes,
		// which it would decode a second time.
		res, err := e.schema.Validate(gojsonschema.NewRawLoader(v))
		if err != nil {
			return nil, toolerr.MalformedArguments, fmt.Sprintf("Tool call arguments for '%s' could not be read (%v). Please regenerate the tool call with valid JSON arguments.", tool, err)
		}
		for _, re := range res.Errors() {
			problems = append(problems, describe(re))
		}
	}
	for _, rule := range e.rules {
		problems = append(problems, rule.check(obj)...)
	}
	if len(problems) > 0 {
		return nil, toolerr.InvalidArguments, formatProblems(tool, problems, 0)
	}
	if shortened {
		return full, "", ""
	}
	return args, "", ""
}

// shortenAt is the encoded length to which a tool's checks may see its
// long string arguments cut without a different outcome, or 0 when they
// may not. A cut string keeps more characters than any minLength,
// maxLength or enum value of the schema, so those keywords judge it as
// the whole; pattern, format and const could judge a prefix otherwise,
// and rules look at values the schema does not describe, so a tool with
// any of those is checked on its whole arguments.
func shortenAt(params json.RawMessage, rules []Rule) int {
	var schema any
	if len(rules) > 0 || json.Unmarshal(params, &schema) != nil {
		return 0
	}
	longest, ok := longestStated(schema)
	if !ok {
		return 0
	}
	return jsonx.MaxEncodedRune * (max(longest, 4096) + 2)
}

// longestStated walks a schema for the string keywords: the largest
// length it states, and false when it has one a prefix could fail
// differently.
func longestStated(v any) (int, bool) {
	longest := 0
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			switch k {
			case "pattern", "format", "const", "contentEncoding", "contentMediaType", "patternProperties":
				return 0, false
			case "minLength", "maxLength":
				if n, ok := val.(float64); ok && n > float64(longest) {
					longest = int(min(n, 1<<30))
				}
			case "enum":
				list, _ := val.([]any)
				for _, e := range list {
					if s, ok := e.(string); ok {
						longest = max(longest, utf8.RuneCountInString(s))
					}
				}
			}
			n, ok := longestStated(val)
			if !ok {
				return 0, false
			}
			longest = max(longest, n)
		}
	case []any:
		for _, val := range t {
			n, ok := longestStated(val)
			if !ok {
				return 0, false
			}
			longest = max(longest, n)
		}
	}
	return longest, true
}

// problemList collects problems up to maxCollected and counts the rest.
type problemList struct {
	list    []problem
	dropped int
}

func (l *problemList) add(p problem) {
	if len(l.list) < maxCollected {
		l.list = append(l.list, p)
		return
	}
	l.dropped++
}

// formatProblems is the message of an invalid_arguments result: the
// problems sorted by parameter, then text, without repeats, bounded.
// dropped counts problems found but not collected.
func formatProblems(tool string, problems []problem, dropped int) string {
	sort.Slice(problems, func(i, j int) bool {
		if problems[i].field != problems[j].field {
			return problems[i].field < problems[j].field
		}
		return problems[i].text < problems[j].text
	})
	var texts []string
	for i, p := range problems {
		if i > 0 && p == problems[i-1] {
			continue
		}
		texts = append(texts, runes.Shorten(p.text, maxProblemChars))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Invalid parameters for tool '%s': ", tool)
	shown := 0
	for _, t := range texts {
		if shown == maxProblems || b.Len()+len(t) > maxMessageChars {
			break
		}
		if shown > 0 {
			b.WriteString("; ")
		}
		b.WriteString(t)
		shown++
	}
	if rest := len(texts) - shown + dropped; rest > 0 {
		fmt.Fprintf(&b, "; and %d more %s", rest, runes.Plural(rest, "problem", "problems"))
	}
	return b.String()
}

// describe turns one gojsonschema error into the short form a model reads:
// "start_line must be >= 1", "missing required path", "paths[0] should be string".
func describe(e gojsonschema.ResultError) problem {
	field := fieldPath(e.Field())
	d := e.Details()
	switch e.Type() {
	case "required":
		f := join(field, name(fmt.Sprint(d["property"])))
		return problem{f, "missing required " + f}
	case "additional_property_not_allowed":
		f := join(field, name(fmt.Sprint(d["property"])))
		return problem{f, "unknown parameter " + f}
	}
	var text string
	switch e.Type() {
	case "invalid_type":
		text = fmt.Sprintf("should be %s, not %s", d["expected"], d["given"])
	case "enum":
		text = fmt.Sprintf("must be one of [%s]", d["allowed"])
	case "string_gte":
		text = fmt.Sprintf("must be at least %v characters long", d["min"])
	case "string_lte":
		text = fmt.Sprintf("must be at most %v characters long", d["max"])
	case "number_gte":
		text = fmt.Sprintf("must be >= %v", d["min"])
	case "number_gt":
		text = fmt.Sprintf("must be > %v", d["min"])
	case "number_lte":
		text = fmt.Sprintf("must be <= %v", d["max"])
	case "number_lt":
		text = fmt.Sprintf("must be < %v", d["max"])
	case "array_min_items":
		text = fmt.Sprintf("must have at least %v items", d["min"])
	case "array_max_items":
		text = fmt.Sprintf("must have at most %v items", d["max"])
	case "unique":
		text = "must not repeat items"
	case "pattern":
		text = fmt.Sprintf("must match the pattern %v", d["pattern"])
	case "const":
		text = fmt.Sprintf("must be %v", d["allowed"])
	default:
		return problem{field, fmt.Sprintf("%s: %s", orArgs(field), e.Description())}
	}
	return problem{field, orArgs(field) + " " + text}
}

// normalizeNumbers rewrites, in place, every number with an integral value
// that fits in 64 bits as an integer literal ("5.0" and "5e0" become "5"),
// and reports numbers too long or with too large an exponent. It returns
// whether anything was rewritten.
func normalizeNumbers(v any, path string, problems *problemList) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for k, el := range x {
			p := join(path, name(k))
			if n, ok := el.(json.Number); ok {
				if m, ok := normalizeNumber(n, p, problems); ok {
					x[k] = m
					changed = true
				}
				continue
			}
			changed = normalizeNumbers(el, p, problems) || changed
		}
	case []any:
		for i, el := range x {
			p := fmt.Sprintf("%s[%d]", orArgs(path), i)
			if n, ok := el.(json.Number); ok {
				if m, ok := normalizeNumber(n, p, problems); ok {
					x[i] = m
					changed = true
				}
				continue
			}
			changed = normalizeNumbers(el, p, problems) || changed
		}
	}
	return changed
}

func normalizeNumber(n json.Number, path string, problems *problemList) (json.Number, bool) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if len(s) > maxNumberChars {
			problems.add(problem{path, fmt.Sprintf("%s is a number of %d digits; numbers must be at most %d characters long", path, len(s), maxNumberChars)})
		}
		return "", false
	}
	if len(s) > maxNumberChars {
		problems.add(problem{path, fmt.Sprintf("%s is a number of %d characters; numbers must be at most %d characters long", path, len(s), maxNumberChars)})
		return "", false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			problems.add(problem{path, fmt.Sprintf("%s must be a number with an exponent between -%d and %d, not %s", path, maxExponent, maxExponent, runes.Shorten(s, 40))})
			return "", false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return "", false
	}
	return json.Number(strconv.FormatInt(r.Num().Int64(), 10)), true
}

// argumentsError is the cause of the error Decode returns: problems in the
// schema's form, so that Invoke reports them exactly like schema problems.
type argumentsError struct{ problems []problem }

func (e *argumentsError) Error() string {
	texts := make([]string, len(e.problems))
	for i, p := range e.problems {
		texts[i] = p.text
	}
	return "Invalid parameters: " + strings.Join(texts, "; ")
}

// Decode unmarshals validated arguments into a tool's typed struct. A value
// the schema allows but the struct cannot hold (an integer beyond 64 bits)
// becomes a problem in the schema's form, never a Go decoder message.
//
// A T whose pointer is a jsonx.MemberDecoder reads plain arguments (see
// jsonx.DecodeMembers) itself, to the same value, without encoding/json's
// reflection, which was most of what decoding a small call cost.
func Decode[T any](args json.RawMessage) (T, error) {
	var v T
	if len(args) > bigArguments {
		if decodeBig(args, &v, bigString) {
			return v, nil
		}
		v = *new(T)
	} else if d, ok := any(&v).(jsonx.MemberDecoder); ok {
		if jsonx.DecodeMembers(args, d) {
			return v, nil
		}
		v = *new(T)
	}
	err := json.Unmarshal(args, &v)
	if err == nil {
		return v, nil
	}
	// Arguments that did not come through Invoke's check (a caller that
	// decodes on its own) may still hold integers written as 3.0 or 1e2.
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var raw any
	var nums problemList
	if dec.Decode(&raw) == nil && normalizeNumbers(raw, "", &nums) && len(nums.list) == 0 {
		if fixed, merr := json.Marshal(raw); merr == nil {
			var w T
			if err2 := json.Unmarshal(fixed, &w); err2 == nil {
				return w, nil
			} else {
				err = err2
			}
		}
	}
	ae := decodeError(err)
	return v, &toolerr.Error{Code: toolerr.InvalidArguments, Message: ae.Error(), Err: ae}
}

func decodeError(err error) *argumentsError {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return &argumentsError{[]problem{{"", "arguments could not be read as this tool's parameters"}}}
	}
	field := orArgs(fieldPath(te.Field))
	neg := strings.HasPrefix(te.Value, "number -")
	if te.Type != nil && strings.HasPrefix(te.Value, "number") {
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			bits := te.Type.Bits()
			if neg {
				return &argumentsError{[]problem{{field, fmt.Sprintf("%s must be >= %d", field, int64(-1)<<(bits-1))}}}
			}
			return &argumentsError{[]problem{{field, fmt.Sprintf("%s must be <= %d", field, int64(uint64(1)<<(bits-1)-1))}}}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			if neg {
				return &argumentsError{[]problem{{field, field + " must be >= 0"}}}
			}
			return &argumentsError{[]problem{{field, fmt.Sprintf("%s must be <= %d", field, ^uint64(0)>>(64-te.Type.Bits()))}}}
		case reflect.Float32, reflect.Float64:
			return &argumentsError{[]problem{{field, field + " is out of range for a number"}}}
		}
	}
	want := "another type"
	if te.Type != nil {
		want = kindName(te.Type.Kind())
	}
	given, _, _ := strings.Cut(te.Value, " ")
	return &argumentsError{[]problem{{field, fmt.Sprintf("%s should be %s, not %s", field, want, given)}}}
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "integer"
}

// whatToSend is the "Next:" advice for arguments that are not an object:
// an example built from the schema's required parameters and the rules.
func whatToSend(e *entry) string {
	return fmt.Sprintf("send the arguments as one JSON object of named parameters, such as %s (an empty body means {}).", e.example)
}

// exampleArgs builds a short example object from a schema: its required
// parameters, then the first parameter of each exactly-one rule, each with
// a placeholder of its type.
func exampleArgs(params json.RawMessage, rules []Rule) string {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(params, &s)
	names := append([]string(nil), s.Required...)
	for _, r := range rules {
		if r.first != "" {
			names = append(names, r.first)
		}
	}
	var parts []string
	for _, n := range names {
		p := s.Properties[n]
		val := `"..."`
		switch {
		case len(p.Enum) > 0:
			b, _ := json.Marshal(p.Enum[0])
			val = string(b)
		case p.Type == "integer" || p.Type == "number":
			val = "1"
		case p.Type == "boolean":
			val = "true"
		case p.Type == "array":
			val = `["..."]`
		case p.Type == "object":
			val = "{}"
		}
		parts = append(parts, strconv.Quote(n)+": "+val)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "another JSON value"
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// jsonProblem says where a JSON text breaks, for the malformed-arguments
// message. Whitespace JSON does not allow (a no-break space, a line
// separator, a byte-order mark) is named, since it is invisible.
func jsonProblem(b []byte) string {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	switch {
	case err == nil:
		return "no problem found"
	case errors.As(err, &se) && se.Offset >= int64(len(b)):
		return fmt.Sprintf("the JSON ends early after %d bytes", len(b))
	case errors.As(err, &se):
		at := max(int(se.Offset)-1, 0)
		if r, _ := utf8.DecodeRune(b[at:]); unicode.IsSpace(r) || r == '\uFEFF' {
			return fmt.Sprintf("byte %d is %U, which JSON does not allow outside strings", at, r)
		}
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	case strings.Contains(err.Error(), "unexpected end"):
		return fmt.Sprintf("the JSON ends early after %d bytes", len(b))
	}
	return err.Error()
}

// fieldPath turns gojsonschema's "(root)", "a.b" and "paths.0" into
// "", "a.b" and "paths[0]".
func fieldPath(f string) string {
	if f == "(root)" || f == "" {
		return ""
	}
	parts := strings.Split(f, ".")
	var b strings.Builder
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil && i > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// name is a parameter name as a message shows it: as is when it is a plain
// word, quoted and cut when a model sent something odd.
func name(n string) string {
	plain := n != "" && len(n) <= 64
	for _, c := range n {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return n
	}
	return strconv.Quote(runes.Shorten(n, 64))
}

func join(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

func orArgs(field string) string {
	if field == "" {
		return "arguments"
	}
	return field
}
