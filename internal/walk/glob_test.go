package walk

import (
	"path"
	"strings"
	"testing"
)

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "anything.txt", true},
		{"*", "", true},
		{"*.go", "main.go", true},
		{"*.go", "MAIN.GO", true},
		{"*.GO", "main.go", true},
		{"*.go", "main.go.txt", false},
		{"*.go", "go", false},
		{"main.go", "Main.Go", true},
		{"main.go", "xmain.go", false},
		{"?.txt", "a.txt", true},
		{"?.txt", "ab.txt", false},
		{"?.txt", "é.txt", true}, // one character, two bytes
		{"file[0-9].md", "file7.md", true},
		{"file[0-9].md", "filex.md", false},
		{"file[!0-9].md", "filex.md", true},
		{"file[^0-9].md", "file1.md", false},
		{"[a-c]*", "Banana", true},
		{"[A-C]*", "banana", true},
		{"[!a-c]*", "Banana", false},
		{"*test*", "my_TEST_file.py", true},
		{"*a*b*c", "aXbYc", true},
		{"*a*b*c", "aXbYcZ", false},
		{"a*a*a*a*b", strings.Repeat("a", 60), false},
		{`\*.txt`, "*.txt", true},
		{`\*.txt`, "a.txt", false},
		{"*[]]*", "a]b", true},
		{"Ä*", "äpfel.txt", true},
		{"straße*", "STRASSE", false}, // simple folding only, like strings.EqualFold
		{"*.kt", "MAIN.KT", true},
		{"*.kt", "main.\u212at", true}, // Kelvin sign folds to k
		{"readme", "README", true},
		{"", "", true},
		{"", "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.name, func(t *testing.T) {
			p, err := Compile(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Match([]byte(tt.name)); got != tt.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
			}
		})
	}
}

func TestPatternAgreesWithPathMatch(t *testing.T) {
	patterns := []string{"*.go", "a?c", "[a-c]*", "*x*y", "[^b]*", "ab", "*"}
	names := []string{"a.go", "abc", "acc", "bx_y", "xy", "b", "ab", "c.GO", ""}
	for _, pat := range patterns {
		p, err := Compile(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			want, _ := path.Match(strings.ToLower(pat), strings.ToLower(name))
			if got := p.Match([]byte(name)); got != want {
				t.Errorf("Match(%q, %q) = %v; path.Match says %v", pat, name, got, want)
			}
		}
	}
}

func TestCompileRejectsBadPatterns(t *testing.T) {
	for _, pat := range []string{"[abc", `abc\`, "[z-a]", "[", "[!"} {
		t.Run(pat, func(t *testing.T) {
			if _, err := Compile(pat); err == nil {
				t.Errorf("Compile(%q) succeeded", pat)
			}
		})
	}
}

func BenchmarkPatternSuffix(b *testing.B) {
	p, _ := Compile("*.go")
	name := []byte("file123456.go")
	for b.Loop() {
		p.Match(name)
	}
}

func BenchmarkPatternGeneral(b *testing.B) {
	p, _ := Compile("file*[0-9].g?")
	name := []byte("file123456.go")
	for b.Loop() {
		p.Match(name)
	}
}
