package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// Canonical returns the canonical form of a JSON document: the bytes an
// approval's hash is taken of. Two documents have the same canonical form
// exactly when a tool reads the same value from them:
//   - members of an object are sorted by name (byte order of their UTF-8),
//     with no space anywhere;
//   - strings are written with the fewest escapes, whatever escapes the
//     caller used ("\u0041" and "A" are one string);
//   - numbers are written as their exact decimal value, normalized (1,
//     1.0, 1e0 and 10e-1 are one number), never through a float64: two
//     integers above 2^53 that a float64 cannot tell apart, or two
//     decimals that round to one float, stay two numbers, so a changed
//     digit always changes the hash.
//
// A document with an object naming one member twice is refused: two
// readers of it may take different values (the first or the last), so an
// approval of one could run the other. So is anything that is not one
// well-formed JSON value in UTF-8.
func Canonical(doc []byte) ([]byte, error) {
	if !utf8.Valid(doc) {
		return nil, errors.New("the arguments are not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out bytes.Buffer
	if err := canonValue(dec, &out, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the arguments hold more than one JSON value")
	}
	return out.Bytes(), nil
}

// Hash is the SHA-256 of doc's canonical form, in lower-case hex: an
// approval's arguments_sha256.
func Hash(doc []byte) (string, error) {
	c, err := Canonical(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// maxDepth bounds nesting, as the registry's checks do.
const maxDepth = 200

func canonValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return errors.New("the arguments nest too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("the arguments are not valid JSON: %w", err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return canonObject(dec, out, depth)
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := canonValue(dec, out, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			out.WriteByte(']')
			return nil
		}
		return fmt.Errorf("the arguments are not valid JSON: unexpected %q", v)
	case string:
		writeString(out, v)
	case json.Number:
		n, err := canonNumber(string(v))
		if err != nil {
			return err
		}
		out.WriteString(n)
	case bool:
		if v {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	}
	return nil
}

func canonObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	type member struct {
		name  string
		value []byte
	}
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("the arguments are not valid JSON: %w", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return fmt.Errorf("the arguments name the member %q twice; name it once", name)
		}
		seen[name] = true
		var v bytes.Buffer
		if err := canonValue(dec, &v, depth+1); err != nil {
			return err
		}
		members = append(members, member{name, v.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	sort.Slice(members, func(i, j int) bool { return members[i].name < members[j].name })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, m.name)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

// writeString writes s as a JSON string with the fewest escapes: the
// quote, the backslash and control characters only, the short forms
// where JSON has them.
func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			out.WriteString(`\"`)
		case r == '\\':
			out.WriteString(`\\`)
		case r == '\n':
			out.WriteString(`\n`)
		case r == '\r':
			out.WriteString(`\r`)
		case r == '\t':
			out.WriteString(`\t`)
		case r == '\b':
			out.WriteString(`\b`)
		case r == '\f':
			out.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(out, `\u%04x`, r)
		default:
			out.WriteRune(r)
		}
	}
	out.WriteByte('"')
}

// canonNumber writes a JSON number literal as its exact value, normalized:
// "-" when negative, the significant digits with no leading or trailing
// zero, and "e" and the exponent when it is not 0, so that the value is
// the digits times ten to the exponent ("15e-1" for 1.5, "1e2" for 100,
// "0" for every zero).
func canonNumber(lit string) (string, error) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp := lit, int64(0)
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant = lit[:i]
		var e int64
		if _, err := fmt.Sscan(strings.TrimPrefix(lit[i+1:], "+"), &e); err != nil {
			return "", fmt.Errorf("the number %s has an exponent out of range", lit)
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	exp -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteString(trimmed)
	if exp != 0 {
		fmt.Fprintf(&b, "e%d", exp)
	}
	return b.String(), nil
}
