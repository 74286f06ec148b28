package headtail

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBuffer(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		head   string
		tail   string
		drop   int64
	}{
		{"empty", nil, "", "", 0},
		{"fits head", []string{"abc"}, "abc", "", 0},
		{"fits both", []string{"abcd", "efg"}, "abcd", "efg", 0},
		{"wraps", []string{"abcd", "efghijk"}, "abcd", "hijk", 3},
		{"small writes wrap", strings.Split("abcdefghijklmn", ""), "abcd", "klmn", 6},
		{"one big write", []string{"0123456789abcdefghij"}, "0123", "ghij", 12},
		{"exact tail", []string{"abcd", "efgh"}, "abcd", "efgh", 0},
		{"exact then more", []string{"abcd", "efgh", "ij"}, "abcd", "ghij", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(4, 4)
			var all bytes.Buffer
			for _, w := range tc.writes {
				b.Write([]byte(w))
				all.WriteString(w)
			}
			h, tl, d := b.Snapshot()
			if string(h) != tc.head || string(tl) != tc.tail || d != tc.drop {
				t.Errorf("got %q %q %d, want %q %q %d", h, tl, d, tc.head, tc.tail, tc.drop)
			}
			if b.Total() != int64(all.Len()) {
				t.Errorf("total = %d, want %d", b.Total(), all.Len())
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	buf := New(10000, 10000)
	chunk := bytes.Repeat([]byte("a"), 32<<10)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		buf.Write(chunk)
	}
}

// TestBufferAgainstWhole writes streams in random pieces and checks what
// is kept against the whole stream, for heads and tails of several sizes.
func TestBufferAgainstWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		headCap, tailCap := rng.IntN(40), rng.IntN(40)
		b := New(headCap, tailCap)
		var all []byte
		for n := rng.IntN(12); n > 0; n-- {
			p := make([]byte, rng.IntN(30))
			for j := range p {
				p[j] = byte('a' + rng.IntN(26))
			}
			b.Write(p)
			all = append(all, p...)
		}
		h, tl, d := b.Snapshot()
		wantHead := all[:min(headCap, len(all))]
		rest := all[len(wantHead):]
		wantTail := rest[len(rest)-min(tailCap, len(rest)):]
		if string(h) != string(wantHead) || string(tl) != string(wantTail) || d != int64(len(rest)-len(wantTail)) {
			t.Fatalf("head %d tail %d over %q: got %q %q %d", headCap, tailCap, all, h, tl, d)
		}
	}
}
