#!/usr/bin/env bash
# Load test: a freshly built toolsvc on loopback with temporary folders
# (audit log on, default limits), driven by scripts/loadgen with a mixed
# workload (read_file 30%, write_file 15%, list_dir 15%, file_search 15%,
# memory search 15%, exec true 10%) from many connections for a fixed time.
# Prints throughput, latency percentiles per tool, errors, and the
# service's RSS sampled from /proc every second.
# usage: scripts/load.sh [seconds, default 30] [connections, default 32] [loadgen -mix, e.g. exec=0]
# TOOLSVC_* variables in the environment (TOOLSVC_EXEC_SANDBOX=none...) reach the service.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-30}
CONNS=${2:-32}
MIX=${3:-}
W=$(mktemp -d /tmp/toolsvc-load.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/ws/load/tree" "$W/ws/load/out" "$W/ws/memory" "$W/data"
go build -o "$W/toolsvc" ./cmd/toolsvc
go build -o "$W/loadgen" ./scripts/loadgen

# The data the calls read: a 100-line file, a tree of 20 folders with 10
# files each for list_dir and file_search, a memory file of 2,000 entries.
for i in $(seq 100); do echo "line $i of the file read under load"; done > "$W/ws/load/read.txt"
for d in $(seq 20); do
  mkdir -p "$W/ws/load/tree/d$d"
  for f in $(seq 10); do echo "x" > "$W/ws/load/tree/d$d/f$f.$([ $((f % 2)) -eq 0 ] && echo md || echo txt)"; done
done
for i in $(seq 2000); do
  case $((i % 4)) in
    0) echo "2026-11-$(printf %02d $((i % 28 + 1)))|web|prefers green tea in the morning ($i)" ;;
    1) echo "2026-11-$(printf %02d $((i % 28 + 1)))|telegram|deploy window is Friday 18:00 ($i)" ;;
    *) echo "2026-11-$(printf %02d $((i % 28 + 1)))|web|an ordinary note number $i" ;;
  esac
done > "$W/ws/memory/MEMORY.md"

# Default configuration (info log level: one access line per call, to a file).
: > "$W/toolsvc.log"
TOOLSVC_ADDR=127.0.0.1:0 TOOLSVC_WORKSPACE="$W/ws" TOOLSVC_DATA_DIR="$W/data" \
  "$W/toolsvc" > "$W/toolsvc.log" 2>&1 &
SVC=$!
ADDR=""
for _ in $(seq 100); do
  ADDR=$(sed -n 's/.*"addr":"\([^"]*\)".*"message":"listening".*/\1/p' "$W/toolsvc.log" | head -1 || true)
  [ -n "$ADDR" ] && curl -sf "http://$ADDR/readyz" >/dev/null && break
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "toolsvc did not start:"; cat "$W/toolsvc.log"; exit 1; }
sleep 1 # let start-up settle before the first RSS sample
echo "toolsvc pid $SVC on $ADDR ($(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg)); $DUR s, $CONNS connections"
grep -o '"message":"exec sandbox: [^"]*"' "$W/toolsvc.log" || true
"$W/loadgen" -url "http://$ADDR" -conns "$CONNS" -duration "${DUR}s" -pid "$SVC" -mix "$MIX"
echo "audit files written: $(find "$W/data/audit_logs" -name '*.json' -not -path '*/.replaced/*' | wc -l)"
if grep -q '"level":"error"' "$W/toolsvc.log"; then
  echo "service errors logged:"; grep '"level":"error"' "$W/toolsvc.log" | head -5
fi
