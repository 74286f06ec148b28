#!/usr/bin/env bash
# Refreshes the Swagger UI files GET /docs serves (embedded in the binary,
# internal/docspage/assets/swagger-ui/) from npm's swagger-ui-dist at the
# version pinned below: the bundle, its stylesheet and their licences.
# Change the version here, run this script, and commit what it changed.
#   scripts/swagger-ui.sh
set -euo pipefail
cd "$(dirname "$0")/.."

version=5.35.0 # swagger-ui-dist on npm
dest=internal/docspage/assets/swagger-ui
files=(swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css LICENSE NOTICE)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "swagger-ui-dist@$version" >/dev/null)
tar -xzf "$tmp"/swagger-ui-dist-"$version".tgz -C "$tmp"
mkdir -p "$dest"
for f in "${files[@]}"; do
  cp "$tmp/package/$f" "$dest/$f"
done
# The files name their source maps, which are not shipped: the browser's
# developer tools would ask the service for them and get a 404.
sed -i -e 's|/\*# sourceMappingURL=[^*]*\*/||' -e '/^\/\/# sourceMappingURL=/d' "$dest/swagger-ui.css" "$dest/swagger-ui-bundle.js"
echo "$version" > "$dest/VERSION"
echo "swagger-ui-dist $version -> $dest"
