#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need
# (Debian packages: Chromium and Xvfb for the screenshot tests, bubblewrap
# for exec's sandbox, python3 for the example agent, nodejs and npm for the
# MCP servers the mcpmount tests and the mock model server the agent
# tests install from npm, PostgreSQL for the shared store and HAProxy for
# the replicas test), downloads the Go
# modules, then vets, runs staticcheck and deadcode, checks the size of
# functions (scripts/funclen, gocyclo), and runs every test
# with the race detector.
#   scripts/test.sh            # everything
#   scripts/test.sh ./internal/registry/...   # some packages
#   FUZZ=1 scripts/test.sh     # and a short fuzzing pass (always when CI=true)
#   TOOLSVC_TEST_CONTAINER=1 scripts/test.sh   # and the image on podman (root)
#   TEST_PARALLEL=1 scripts/test.sh   # one package's tests at a time (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

# jq: the docs pages' examples use it, and TestDocsRun runs them.
packages=(chromium xvfb bubblewrap gcc fonts-liberation ca-certificates python3 haproxy curl git jq)
# PostgreSQL by what answers: a server of another origin on 5432 will do.
command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432 || packages+=(postgresql)
# The image built and checked on a real engine (podman, as root): in CI
# (CI=true, as .ci/run sets), else opt-in, as it needs root and a few
# minutes (scripts/container-test.sh). TOOLSVC_TEST_CONTAINER=0 skips it.
container="${TOOLSVC_TEST_CONTAINER:-}"
if [ -z "$container" ] && [ "${CI:-}" = "true" ]; then container=1; fi
# Its packages go in with the others, in the one apt run.
if [ "$container" = "1" ]; then packages+=(podman runc debootstrap podman-compose curl); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm by command, not by package: a machine whose Node.js
# comes from another source (NodeSource's nodejs package ships npm) would
# refuse Debian's npm as a conflict.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)

# On a fresh machine the installs and the image's first build wait mostly
# on the network, the compile checks below on the processors: they run
# side by side. In the background: the missing packages, then, with the
# container test, the image's build (scripts/container-test.sh build).
# Its output is kept in a file and shown when it is joined; the tests
# wait for the packages only.
# sudo asks for its password here, in the foreground, where it can be
# seen; the background then uses the credentials it keeps for a while.
SUDO=""
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing in the background: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
    sudo -v
  fi
fi
bg_dir=$(mktemp -d)
# Should a step fail meanwhile, the script still waits for the
# background before it ends: apt stopped midway leaves dpkg broken.
trap '[ -z "$(jobs -p)" ] || echo "waiting for the background installs, image build or container test to end" >&2
  wait
  [ -z "${container_pid:-}" ] || [ ! -s "$bg_dir/container" ] || cat "$bg_dir/container"
  rm -rf "$bg_dir"' EXIT
(
  if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  touch "$bg_dir/installed"
  if [ "$container" = "1" ]; then
    bash scripts/container-test.sh build
  fi
) >"$bg_dir/log" 2>&1 </dev/null &
bg_pid=$!
# join_background waits for the background work to end, shows its output
# and stops here if it failed.
join_background() {
  local rc=0
  wait "$bg_pid" || rc=$?
  cat "$bg_dir/log"
  if [ "$rc" -ne 0 ]; then
    echo "the installs or the image's build failed (exit $rc): see above" >&2
    exit 1
  fi
}
# wait_installed waits for the packages, or for the background to fail.
wait_installed() {
  while [ ! -e "$bg_dir/installed" ]; do
    kill -0 "$bg_pid" 2>/dev/null || join_background
    sleep 1
  done
}

go mod download
# Linux's checks build with the race detector, as the tests do, so that
# vet, staticcheck and the tests share one compile of every package
# instead of one without it and one with it (on a fresh machine that
# second compile took about four minutes of processor time).
# The race detector needs cgo's C compiler, which may be among the
# packages still going in.
command -v "$(go env CC)" >/dev/null || wait_installed
go vet -race ./...
# toolsvc also runs on macOS and Windows desktops: vet compiles every
# package (tests included) for them, which keeps the build tags honest.
# No file of the project is chosen by processor, so darwin/arm64 stands
# for macOS on both (each system is a full compile: close to two minutes
# on a fresh machine).
for t in darwin/arm64 windows/amd64; do
  GOOS=${t%/*} GOARCH=${t#*/} go vet ./...
done
unformatted=$(gofmt -l cmd internal scripts deploy)
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
# Static checks, at pinned versions, installed once outside the module
# (GOPATH/toolsvc-tools, one binary per version): staticcheck's default
# checks on every system toolsvc builds for, and deadcode for functions
# that neither the programs (cmd/, scripts/) nor the tests reach; gocyclo
# for the complexity limit below.
staticcheck_version=v0.8.2 # honnef.co/go/tools
deadcode_version=v0.52.0   # golang.org/x/tools
gocyclo_version=v0.6.0     # github.com/fzipp/gocyclo
tools_bin="$(go env GOPATH)/toolsvc-tools"
staticcheck="$tools_bin/staticcheck-$staticcheck_version"
deadcode="$tools_bin/deadcode-$deadcode_version"
gocyclo="$tools_bin/gocyclo-$gocyclo_version"
mkdir -p "$tools_bin"
if [ ! -x "$staticcheck" ]; then
  GOBIN="$tools_bin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
  mv "$tools_bin/staticcheck" "$staticcheck"
fi
if [ ! -x "$deadcode" ]; then
  GOBIN="$tools_bin" go install "golang.org/x/tools/cmd/deadcode@$deadcode_version"
  mv "$tools_bin/deadcode" "$deadcode"
fi
if [ ! -x "$gocyclo" ]; then
  GOBIN="$tools_bin" go install "github.com/fzipp/gocyclo/cmd/gocyclo@$gocyclo_version"
  mv "$tools_bin/gocyclo" "$gocyclo"
fi
GOFLAGS="${GOFLAGS:+$GOFLAGS }-race" "$staticcheck" ./...  # -race: see vet above
for t in darwin/arm64 windows/amd64; do
  GOOS=${t%/*} GOARCH=${t#*/} "$staticcheck" ./...
done
dead=$("$deadcode" -test ./...)
if [ -n "$dead" ]; then
  echo "deadcode: functions nothing reaches (delete them, or use them):" >&2
  echo "$dead" >&2
  exit 1
fi
# Function size: no function of the service (internal/, cmd/; tests
# excepted) is over 80 lines or cyclomatic complexity 25, so that each can
# be read and reviewed whole. A long data table belongs in a variable, not
# in a function's body. Both checks list the offenders. internal/extract/
# trafilatura is go-trafilatura copied in (see its doc.go) and kept as its
# authors wrote it, so that it can be compared with upstream; it is left out.
vendored=internal/extract/trafilatura
sizes_ok=1
"$gocyclo" -over 25 -ignore "_test\.go\$|^$vendored/" internal cmd >&2 || sizes_ok=0
go run ./scripts/funclen -over 80 -skip "$vendored" internal cmd >&2 || sizes_ok=0
if [ "$sizes_ok" -eq 0 ]; then
  echo "functions above are over 80 lines or complexity 25: split them into smaller ones" >&2
  exit 1
fi
if [ $# -eq 0 ]; then
  # The Kubernetes manifests, in deploy/k8s's own module (it carries the
  # Kubernetes libraries the service does not need): Kustomize builds the
  # base and the overlay, and every manifest is decoded strictly into the
  # API types and checked against the restricted Pod Security Standard.
  (cd deploy/k8s && go vet ./... && go test -count=1 ./...)
  set -- ./...
fi
wait_installed
# The shared store's tests need PostgreSQL at 127.0.0.1:5432 with trust
# authentication for local connections (Debian's cluster: user postgres).
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  cluster=$(ls /etc/postgresql | sort -V | tail -1)
  hba="/etc/postgresql/$cluster/main/pg_hba.conf"
  if ! grep -q "^host all all 127.0.0.1/32 trust" "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$cluster" main start
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi

# Three packages' tests at once on two processors (go test's default is
# one per processor): most of the long ones wait more than they compute
# (servers starting, sandboxes, npx, Chromium, PostgreSQL), and a third
# keeps the processors busy meanwhile. Each test is written for a loaded
# machine: deadlines are generous, no test times itself.
go test -race -count=1 -p "${TEST_PARALLEL:-3}" -timeout 18m "$@"

# A short fuzzing pass over every fuzz target (CI, or FUZZ=1): go test -fuzz
# takes one package and one target per run. The seed corpora and the
# testdata/fuzz/ regression cases already ran above as ordinary tests.
#
# The image, built in the background above, is checked on podman
# meanwhile: the check mostly waits (containers starting, health checks,
# npx's download) and each fuzzing run lasts a fixed time, so side by side
# they take the time of the longer. The check's output is shown at its end.
join_background
container_pid=""
if [ "$container" = "1" ]; then
  bash scripts/container-test.sh check >"$bg_dir/container" 2>&1 </dev/null &
  container_pid=$!
fi
if [ "${CI:-}" = "true" ] || [ "${FUZZ:-}" = "1" ]; then
  fuzztime="${FUZZTIME:-5s}"  # ten targets: under two minutes in all
  targets=(
    "./internal/redact/ FuzzProgress"
    "./internal/registry/ FuzzInvokeArguments"
    "./internal/workspace/ FuzzResolve"
    "./internal/shellguard/ FuzzCheck"
    "./internal/shellguard/ FuzzCheckRmRfRoot"
    "./internal/netguard/ FuzzCheckURL"
    "./internal/netguard/ FuzzDecide"
    "./internal/extract/ FuzzHTML"
    "./internal/memory/ FuzzFormatEntry"
    "./internal/memory/ FuzzStoreFile"
  )
  for t in "${targets[@]}"; do
    read -r pkg name <<<"$t"
    echo "fuzz $name ($pkg) for $fuzztime"
    # On a loaded machine the fuzzing engine itself may end a run with
    # "context deadline exceeded" (a worker that did not answer when the
    # time ran out) and no failing input: that run is tried once more. A
    # real finding names its input under testdata/fuzz/ and fails. Up to
    # three runs in all.
    out=$(mktemp)
    for try in 1 2 3; do
      if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$pkg" 2>&1 | tee "$out"; then
        break
      fi
      if [ "$try" -eq 3 ] || ! grep -q "context deadline exceeded" "$out" || grep -q "Failing input written" "$out"; then
        rm -f "$out"
        exit 1
      fi
      echo "fuzz $name: the engine timed out without a finding; once more"
    done
    rm -f "$out"
  done
fi

if [ -n "$container_pid" ]; then
  rc=0
  wait "$container_pid" || rc=$?
  cat "$bg_dir/container"
  container_pid="" # shown: not again on exit
  if [ "$rc" -ne 0 ]; then
    echo "the container test failed (exit $rc): see above" >&2
    exit 1
  fi
fi
