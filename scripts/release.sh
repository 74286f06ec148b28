#!/usr/bin/env bash
# release.sh builds toolsvc for Linux, macOS and Windows, each on amd64 and
# arm64, into dist/VERSION/: static binaries (CGO off, -trimpath, the
# version given to the linker), a CycloneDX SBOM for each binary (from the
# build information in it, by scripts/sbom), and SHA256SUMS over all of
# them. It ends by running the linux/amd64 binary's `version`, which must
# print the version built in (when this machine can run it).
#
# Usage, from anywhere in the checkout: scripts/release.sh
#   VERSION  the version built in (default: git describe --tags --always
#            --dirty, as the image's builds use; devel without git). A
#            release is built from a clean checkout of its tag: the
#            version is then the tag alone, v0.1.0.
#   DIST     where the folder goes (default dist)
#
# It builds no image: scripts/compose-up.sh and the Dockerfile's VERSION
# argument do (docker build --build-arg VERSION=v0.1.0 -t toolsvc:v0.1.0 ...).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
out=${DIST:-dist}/$version
say() { echo "release: $*" >&2; }

rm -rf "$out"
mkdir -p "$out"
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
	os=${target%/*} arch=${target#*/}
	bin=toolsvc-$version-$os-$arch
	[ "$os" = windows ] && bin+=.exe
	say "building $bin"
	# -buildvcs=auto: the commit and its state go into the build
	# information (the SBOM's vcs.* properties) where there is a checkout,
	# also when the environment or go env says -buildvcs=false; the version
	# the binary reports is the linker's either way.
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=auto \
		-ldflags "-s -w -X main.buildVersion=$version" -o "$out/$bin" ./cmd/toolsvc
	go run ./scripts/sbom -version "$version" "$out/$bin" >"$out/$bin.cdx.json"
done
(cd "$out" && sha256sum -- toolsvc-* >SHA256SUMS)

bin=$out/toolsvc-$version-linux-amd64
if [ "$(uname -s)/$(uname -m)" = Linux/x86_64 ]; then
	got=$("$bin" version)
	[ "$got" = "toolsvc $version" ] || {
		say "FAIL: $bin version printed '$got', not 'toolsvc $version'"
		exit 1
	}
	say "$bin version: $got"
else
	say "not run: $bin (this machine is $(uname -s)/$(uname -m))"
fi
say "done: $out"
ls -l "$out" >&2
