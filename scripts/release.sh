#!/usr/bin/env bash
# release.sh builds toolsvc for Linux, macOS and Windows, each on amd64 and
# arm64, into dist/VERSION/: static binaries (CGO off, -trimpath, the
# version given to the linker), a CycloneDX SBOM for each binary (from the
# build information in it, by scripts/sbom), and SHA256SUMS over all of
# them. It runs the linux/amd64 binary's `version`, which must print the
# version built in (when this machine can run it). Where a container engine
# answers, it then builds the image of deploy/Dockerfile with the same
# version, tagged toolsvc:VERSION and toolsvc:latest (the tag
# deploy/compose.yaml runs), and runs its `version` too; without one it
# says so and builds no image.
#
# Usage, from anywhere in the checkout: scripts/release.sh
#   VERSION  the version built in (default: git describe --tags --always
#            --dirty, as the image's builds use; devel without git). A
#            release is built from a clean checkout of its tag: the
#            version is then the tag alone, v0.1.0.
#   DIST     where the folder goes (default dist)
#   ENGINE   podman or docker to build the image with (default: podman if
#            it answers, else docker if its daemon does); none: no image.
#            Podman reads its settings from CONTAINERS_CONF as usual.
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

# pick_engine sets engine to the first of podman and docker that answers
# (docker's CLI without a running daemon builds nothing), or fails, having
# put in why_none what it found. It runs in this shell, not in $(...), so
# that why_none is kept.
why_none="neither podman nor docker is installed"
pick_engine() {
	local e
	for e in podman docker; do
		command -v "$e" >/dev/null || continue
		if "$e" info >/dev/null 2>&1; then
			engine=$e
			return 0
		fi
		why_none="$e is installed but '$e info' fails"
		[ "$e" = docker ] && why_none+=" (is its daemon running?)"
	done
	return 1
}

# The image, from the same version as the binaries. A tag takes letters,
# digits, _ . and - only: anything else in VERSION becomes -.
engine=${ENGINE:-}
tag=toolsvc:${version//[^A-Za-z0-9_.-]/-}
if [ "$engine" = none ]; then
	say "image: skipped, ENGINE=none"
elif [ -z "$engine" ] && ! pick_engine; then
	say "image: skipped, no container engine: $why_none"
else
	# podman keeps the Dockerfile's HEALTHCHECK only in the docker format.
	format=()
	[ "$engine" = podman ] && format=(--format docker)
	say "image: $engine build $tag and toolsvc:latest"
	"$engine" build "${format[@]}" --build-arg "VERSION=$version" -f deploy/Dockerfile \
		-t "$tag" -t toolsvc:latest .
	# --no-healthcheck: podman would set up the image's health check timer
	# (through systemd) for a container that only prints its version.
	got=$("$engine" run --rm --network none --no-healthcheck "$tag" version)
	[ "$got" = "toolsvc $version" ] || {
		say "FAIL: image $tag version printed '$got', not 'toolsvc $version'"
		exit 1
	}
	id=$("$engine" image inspect --format '{{.Id}}' "$tag")
	id=${id#sha256:}
	say "image: $tag (${id:0:12}) version: $got"
fi
say "done: $out"
ls -l "$out" >&2
