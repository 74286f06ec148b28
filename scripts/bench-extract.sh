#!/usr/bin/env bash
# Compares the extraction throughput of the committed code (HEAD) with an
# earlier revision on the same pages, in one process: the earlier
# internal/extract is built in as a second package, and every corpus page
# goes through the old and the new extractor in turn (the order alternating),
# so both get the same share of a noisy shared machine. Separate benchmark
# runs swing 2x between runs here; interleaving page by page does not.
#
#   scripts/bench-extract.sh [BASE_REV]        (default: main)
#   RUNS=3 scripts/bench-extract.sh ca0aea9
#
# Prints per mode the pages per second of both, and the new/old time ratio
# (median of 14 rounds of 4 passes over the pages, and overall).
set -euo pipefail
base_rev=${1:-main}
runs=${RUNS:-3}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

git -C "$root" archive HEAD | tar -x -C "$tmp"
mkdir -p "$tmp/internal/extractbase"
for f in $(git -C "$root" ls-tree --name-only "$base_rev" internal/extract/ | grep '\.go$' | grep -v '_test\.go$'); do
	# Revisions before go-trafilatura was copied in imported it from its
	# module, which go.mod no longer requires: they get the copy instead
	# (the same code, less the date option they set to Disabled).
	git -C "$root" show "$base_rev:$f" | sed -e 's/^package extract$/package extractbase/' \
		-e 's#trafilatura "github.com/markusmobius/go-trafilatura"#"github.com/countbot/toolsvc/internal/extract/trafilatura"#' \
		-e '/HtmlDateMode: *trafilatura.Disabled,/d' >"$tmp/internal/extractbase/$(basename "$f")"
done

cat >"$tmp/internal/extract/ab_test.go" <<'EOF'
package extract

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/extractbase"
)

func TestAB(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.html"))
	for _, p := range benchPages {
		files = append(files, filepath.Join("testdata", p.file))
	}
	bodies := make([][]byte, len(files))
	for i, f := range files {
		bodies[i], _ = os.ReadFile(f)
	}
	oldE, newE := extractbase.New(extractbase.Options{}), New(Options{})
	for _, mode := range []string{"text", "markdown"} {
		var ratios []float64
		var oldTot, newTot time.Duration
		for round := 0; round < 15; round++ {
			var o, n time.Duration
			for it := 0; it < 4; it++ {
				for i := range files {
					oldFirst := (round+it+i)%2 == 0
					for k := 0; k < 2; k++ {
						start := time.Now()
						if (k == 0) == oldFirst {
							body, _ := extractbase.Decode(bodies[i], "text/html", true)
							oldE.HTML(context.Background(), body, pageURL, extractbase.Mode(mode))
							o += time.Since(start)
						} else {
							body, _ := Decode(bodies[i], "text/html", true)
							newE.HTML(context.Background(), body, pageURL, Mode(mode))
							n += time.Since(start)
						}
					}
				}
			}
			if round > 0 { // the first round pays the one-time costs
				ratios = append(ratios, float64(n)/float64(o))
				oldTot += o
				newTot += n
			}
		}
		sort.Float64s(ratios)
		pages := float64(14 * 4 * len(files))
		t.Logf("%s: %d pages; old %.0f pages/s, new %.0f pages/s; new/old time ratio median %.3f (rounds %.2f-%.2f), overall %.3f",
			mode, len(files), pages/oldTot.Seconds(), pages/newTot.Seconds(), ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], float64(newTot)/float64(oldTot))
	}
}
EOF

cd "$tmp"
go test -c -o "$tmp/ab.test" ./internal/extract/
cd internal/extract
for i in $(seq "$runs"); do
	"$tmp/ab.test" -test.run '^TestAB$' -test.v | grep -o '[a-z]*: [0-9]* pages;.*'
done
