package skills

import (
	"regexp"
	"strings"
	"testing"
)

// TestNamesMatchTheirPatterns: validBin and validEnv accept exactly what
// the patterns they replace accept.
func TestNamesMatchTheirPatterns(t *testing.T) {
	binName := regexp.MustCompile(`^[A-Za-z0-9._+-]{1,128}$`)
	envName := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	cases := []string{"", ".", "..", "...", "git", "python3.12", "g++", "clang-format", "_x", "x_1", "1x", "A",
		"a/b", "../git", "a b", "é", "PATH", "HOME_DIR", "ls\n", "-", "+", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"_" + strings.Repeat("9", 127), "_" + strings.Repeat("9", 128), "a\x00", "x$y", "名字"}
	for _, s := range cases {
		if got, want := validBin(s), binName.MatchString(s) && s != "." && s != ".."; got != want {
			t.Errorf("validBin(%q) = %v, want %v", s, got, want)
		}
		if got, want := validEnv(s), envName.MatchString(s); got != want {
			t.Errorf("validEnv(%q) = %v, want %v", s, got, want)
		}
	}
}
