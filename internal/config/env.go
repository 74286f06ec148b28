package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/runes"
)

// secretField reports whether a field of type t set by variable name holds
// secrets, whose values no message may repeat.
func secretField(t reflect.Type, name string) bool {
	switch t {
	case reflect.TypeFor[Secret](), reflect.TypeFor[APIKeys](), reflect.TypeFor[SecretAccounts]():
		return true
	}
	return redact.SecretVariable(name)
}

// TestPrefix starts the variables tests and scripts set for themselves
// (TOOLSVC_TEST_AS_USER...). They are no settings, and the check of
// unknown names lets them pass.
const TestPrefix = Prefix + "_TEST_"

// Names returns the name of every variable the service reads, in the
// order of the Config's sections and fields.
func Names() []string {
	var out []string
	for _, s := range settings() {
		out = append(out, s.Name)
	}
	return out
}

// CheckNames refuses every TOOLSVC_* variable in environ (NAME=value
// entries, as os.Environ returns them) that is not a setting, naming the
// nearest one: a misspelt variable would otherwise be ignored without a
// word, and the service would run with the default the operator meant to
// change. Names starting with TestPrefix pass.
func CheckNames(environ []string) error {
	known := Names()
	// Names are compared without the prefix: every name shares it, and it
	// would make any two look alike.
	short := make([]string, len(known))
	for i, n := range known {
		short[i] = strings.TrimPrefix(n, Prefix+"_")
	}
	var errs []error
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, Prefix+"_") || strings.HasPrefix(k, TestPrefix) || slices.Contains(known, k) {
			continue
		}
		if near := Nearest(strings.TrimPrefix(k, Prefix+"_"), short); near != "" {
			errs = append(errs, fmt.Errorf("%s is not a setting; did you mean %s_%s? (toolsvc help all lists them all)", k, Prefix, near))
		} else {
			errs = append(errs, fmt.Errorf("%s is not a setting (toolsvc help all lists them all; %s* is left to tests)", k, TestPrefix))
		}
	}
	return errors.Join(errs...)
}

// Nearest returns the name in known closest to name by edit distance
// (Levenshtein, case-insensitive), or "" when even the closest differs in
// more than a third of its characters (at least two edits are always
// allowed): a suggestion that far off would only mislead.
func Nearest(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		d := runes.Distance(strings.ToUpper(name), strings.ToUpper(k))
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist < 0 || bestDist > max(2, len([]rune(best))/3) {
		return ""
	}
	return best
}

// LoadFrom reads the configuration through lookup (a variable's value and
// whether it is set, as os.LookupEnv answers) and validates it, as Load
// does with the process environment. Tests use it to run several services
// with different settings in one process.
func LoadFrom(lookup func(name string) (string, bool)) (Config, error) {
	c, err := parse(lookup)
	if err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, c.CheckFolders()
}

// parse fills a Config from lookup, with each field's default where its
// variable is not set. A type with a Decode method decodes itself; other
// fields are strings, booleans, integers and durations. Only the TOOLSVC_
// name is read, never the name without the prefix (ADDR, LOG_LEVEL),
// which another program's setting could hit.
func parse(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	for _, s := range settings() {
		value, ok := lookup(s.Name)
		if !ok {
			if !s.HasDefault {
				continue
			}
			value = s.Default
		}
		if err := decodeField(v.FieldByIndex(s.index), value); err != nil {
			return c, decodeError(s, value, err)
		}
	}
	return c, nil
}

func decodeField(field reflect.Value, value string) error {
	if d, ok := field.Addr().Interface().(Decoder); ok {
		return d.Decode(value)
	}
	switch field.Kind() {
	case reflect.String:
		field.SetString(value)
	case reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return err
		}
		field.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if field.Type() == reflect.TypeFor[time.Duration]() {
			d, err := time.ParseDuration(value)
			if err != nil {
				return err
			}
			field.SetInt(int64(d))
			return nil
		}
		n, err := strconv.ParseInt(value, 0, field.Type().Bits())
		if err != nil {
			return err
		}
		field.SetInt(n)
	default:
		// A field of a new kind needs a Decode method or a case here;
		// TestLoadFromDefaults trips over it first.
		return fmt.Errorf("config cannot decode a %s", field.Type())
	}
	return nil
}
