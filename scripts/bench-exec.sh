#!/bin/sh
# bench-exec.sh measures what exec costs:
#  1. the overhead of an exec call of `true` against starting `sh -c true`
#     directly from Go, in one run, without a sandbox and under each sandbox
#     the machine offers (Go benchmark BenchmarkExecTrue);
#  2. the peak RSS of the real service binary while a command prints 1 GiB.
# Usage: scripts/bench-exec.sh [sandbox-mode-for-the-RSS-run, default auto]
set -eu
cd "$(dirname "$0")/.."
mode=${1:-auto}

echo "== exec call of true vs sh -c true (ns/op; lower is better)"
go test -run '^$' -bench ExecTrue -benchtime 200x -count 3 ./cmd/toolsvc/ | grep -E '^Benchmark'

echo "== peak RSS while a command prints 1 GiB (sandbox $mode)"
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/toolsvc" ./cmd/toolsvc
port=$((20000 + $$ % 20000))
TOOLSVC_ADDR=127.0.0.1:$port TOOLSVC_WORKSPACE=$tmp/ws TOOLSVC_DATA_DIR=$tmp/data \
	TOOLSVC_EXEC_SANDBOX=$mode TOOLSVC_EXEC_TIMEOUT=5m TOOLSVC_LOG_LEVEL=warn \
	"$tmp/toolsvc" >"$tmp/log" 2>&1 &
pid=$!
i=0
until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/log"; exit 1; }; sleep 0.1
done
# One small call first so that the RSS measured before is the warm one.
curl -fsS -X POST "http://127.0.0.1:$port/tools/exec/invoke" -d '{"command":"true"}' >/dev/null
before=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
startpeak=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
# Reset the peak to the current RSS, so VmHWM below is the peak of the call.
echo 5 >/proc/$pid/clear_refs
start=$(date +%s.%N)
curl -fsS -X POST "http://127.0.0.1:$port/tools/exec/invoke" \
	-d '{"command":"head -c 1073741824 /dev/zero | tr \"\\\\0\" a"}' >"$tmp/result.json"
end=$(date +%s.%N)
peak=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
after=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
grep -o 'bytes of stdout cut here ([0-9]* bytes in all)' "$tmp/result.json" | head -n 1
echo "RSS before the call: $((before / 1024)) MiB (peak during start-up: $((startpeak / 1024)) MiB)"
echo "peak RSS during the 1 GiB call: $((peak / 1024)) MiB; after: $((after / 1024)) MiB; wall time $(echo "$end - $start" | bc) s"
