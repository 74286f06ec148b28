#!/usr/bin/env bash
# Scores toolsvc's page extraction on a public benchmark beside the
# extractors it is measured against, in one run: the comparison set that
# ships with github.com/markusmobius/go-trafilatura (983 annotated pages,
# news, blogs, forums and shops in a dozen languages, from the BBAW corpus
# of Adrien Barbaresi, Polish news collected by tsolewski and German news
# sites). Each page lists snippets its main text must contain and
# boilerplate it must not; the F score is 2TP / (2TP + FP + FN).
#
#   scripts/bench-extract-public.sh            (toolsvc, and go-trafilatura's own table)
#   MODE=markdown scripts/bench-extract-public.sh
#   MISSES=20 scripts/bench-extract-public.sh  (also the pages toolsvc gets most wrong)
#
# The module comes from the Go module proxy; its comparison program runs
# from a copy in a temporary folder and prints go-trafilatura's scores
# (with and without its readability and DOM Distiller fallback), and those
# of go-readability and go-domdistiller alone. scripts/extractcmp scores
# toolsvc on the same pages with the same rules. Nothing of the module is
# kept.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${TRAFILATURA_VERSION:-v1.12.2}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
module=$(cd "$tmp" && go mod download -json "github.com/markusmobius/go-trafilatura@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$module/test-files/comparison" ] || { echo "no comparison pages in $module"; exit 1; }

echo "== toolsvc (internal/extract, ${MODE:-text} mode)"
go run ./scripts/extractcmp -module "$module" -mode "${MODE:-text}" -misses "${MISSES:-0}"

echo
echo "== go-trafilatura $version's own comparison program, same pages"
cp -r "$module" "$tmp/gt"
chmod -R u+w "$tmp/gt"
(cd "$tmp/gt" && go run ./scripts/comparison content -j "$(nproc)" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -v -e ' INF ' -e ' WRN ')
