package tools

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestListDirCapMatchesFullListing compares list_dir, which keeps only the
// entries it can show, with the whole listing sorted and cut, on random
// trees and caps: the same first entries in the same order, and the same
// count of the rest.
func TestListDirCapMatchesFullListing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		ws := budgetWorkspace(t)
		root := filepath.Join(ws.Dir(), fmt.Sprint("t", round))
		var all []string // every path below root, as list_dir names them
		var build func(dir, rel string, depth int)
		build = func(dir, rel string, depth int) {
			os.MkdirAll(dir, 0o755)
			for i := range rng.IntN(12) {
				name := fmt.Sprintf("%c%d", 'a'+rng.IntN(26), i)
				p := name
				if rel != "" {
					p = rel + "/" + name
				}
				if depth < 3 && rng.IntN(3) == 0 {
					all = append(all, p+"/")
					build(filepath.Join(dir, name), p, depth+1)
				} else {
					all = append(all, p)
					os.WriteFile(filepath.Join(dir, name), nil, 0o644)
				}
			}
		}
		build(root, "", 0)
		// Depth-first in name order is the order of the paths compared
		// component by component.
		sort.Slice(all, func(i, j int) bool { return lessPath(all[i], all[j]) })
		for _, limit := range []int{1, 3, 7, 20, 1000} {
			out, err := NewListDir(ws, limit).Execute(context.Background(), []byte(fmt.Sprintf(`{"path":"t%d","recursive":true}`, round)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(out, "\n")[1:] {
				switch {
				case strings.HasPrefix(line, "[DIR]  "):
					got = append(got, strings.TrimPrefix(line, "[DIR]  "))
				case strings.HasPrefix(line, "[FILE] "):
					got = append(got, strings.TrimSuffix(strings.TrimPrefix(line, "[FILE] "), " (0 B)"))
				}
			}
			want := all[:min(limit, len(all))]
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("round %d, cap %d:\ngot  %q\nwant %q", round, limit, got, want)
			}
			if rest := len(all) - len(want); rest > 0 && !strings.Contains(out, fmt.Sprintf("... %d more entries not shown", rest)) {
				t.Fatalf("round %d, cap %d: want %d more:\n%s", round, limit, rest, out)
			}
		}
	}
}

// lessPath orders slash-separated paths as a depth-first walk in name
// order visits them.
func lessPath(a, b string) bool {
	pa := strings.Split(strings.TrimSuffix(a, "/"), "/")
	pb := strings.Split(strings.TrimSuffix(b, "/"), "/")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}
