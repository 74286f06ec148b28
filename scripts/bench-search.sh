#!/usr/bin/env bash
# bench-search.sh: file_search against its peers, side by side in one run.
#
# On the 200,000-file tree of /work/shared/bench (mktree.py, 24,997 *.go
# files) it times, in ROUNDS interleaved rounds:
#   - fd -u -g '*.go'                      (the speed target: within 1.2x)
#   - find -name '*.go'                    (for reference)
#   - toolsvc file_search pattern *.go     through the real HTTP service:
#                                          the binary started on the tree,
#                                          one curl POST per run
# then the bare Go walker (scripts/walkbench) and, once, the reference MCP
# filesystem server's search_files '**/*.go' (the 30x target). fd prints
# every path; file_search counts every match and reports the first 20 with
# their sizes, which is the work a model gets.
#
# Usage: bash scripts/bench-search.sh
# Environment: TREE (/tmp/tree200k), ROUNDS (3), RUNS per round (10),
#   BENCH_DIR (/work/shared/bench), PORT (18473), SKIP_MCP=1 to skip the
#   slow MCP peer.
set -euo pipefail
cd "$(dirname "$0")/.."

TREE=${TREE:-/tmp/tree200k}
ROUNDS=${ROUNDS:-3}
RUNS=${RUNS:-10}
BENCH_DIR=${BENCH_DIR:-/work/shared/bench}
PORT=${PORT:-18473}
WORK=$(mktemp -d /tmp/bench-search.XXXXXX)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

# Inputs and peers.
if [ ! -d "$TREE" ]; then
  log "building $TREE"
  python3 "$BENCH_DIR/mktree.py" "$TREE" 200000 >&2
fi
log "peers"
bash "$BENCH_DIR/setup-peers.sh" >&2
MCP_JS=/tmp/peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
if ! command -v hyperfine >/dev/null; then
  apt-get install -y -qq hyperfine >/dev/null 2>&1 || log "hyperfine not installable; using repeated runs"
fi

# toolsvc, started on the tree like a user would.
log "building toolsvc and walkbench"
go build -o "$WORK/toolsvc" ./cmd/toolsvc
go build -o "$WORK/walkbench" ./scripts/walkbench
TOOLSVC_WORKSPACE="$TREE" TOOLSVC_DATA_DIR="$WORK/data" TOOLSVC_ADDR="127.0.0.1:$PORT" \
  TOOLSVC_LOG_LEVEL=warn "$WORK/toolsvc" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null || { cat "$WORK/server.log" >&2; exit 1; }

BODY='{"path":".","pattern":"*.go","type":"file"}'
cat >"$WORK/search.sh" <<EOF
#!/bin/sh
exec curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' --data '$BODY' http://127.0.0.1:$PORT/tools/file_search/invoke
EOF
chmod +x "$WORK/search.sh"

# Same answer from everyone before timing anyone.
FD_COUNT=$(fdfind -u -g '*.go' "$TREE" | wc -l)
FIND_COUNT=$(find "$TREE" -name '*.go' | wc -l)
TOOL_HEADER=$(curl -fsS -X POST -H 'Content-Type: application/json' --data "$BODY" \
  "http://127.0.0.1:$PORT/tools/file_search/invoke" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"].splitlines()[0])')
log "fd: $FD_COUNT, find: $FIND_COUNT, file_search: $TOOL_HEADER"
case "$TOOL_HEADER" in "Found $FD_COUNT file(s)"*) ;; *) echo "file_search disagrees with fd" >&2; exit 1 ;; esac

# median_of CMD...: median wall time in seconds of RUNS runs after 2 warm-ups.
median_of() {
  local t=()
  for i in $(seq $((RUNS + 2))); do
    local s e
    s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N)
    [ "$i" -gt 2 ] && t+=("$(( e - s ))")
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.4f\n", a[int((NR+1)/2)]/1e9}'
}

: >"$WORK/rounds.tsv"
for r in $(seq "$ROUNDS"); do
  log "round $r/$ROUNDS"
  if command -v hyperfine >/dev/null; then
    hyperfine -N --style none --warmup 2 --runs "$RUNS" --export-json "$WORK/r$r.json" \
      -n fd "fdfind -u -g *.go $TREE" \
      -n find "find $TREE -name *.go" \
      -n file_search "$WORK/search.sh" >&2
    python3 - "$WORK/r$r.json" "$r" >>"$WORK/rounds.tsv" <<'EOF'
import json, sys
for res in json.load(open(sys.argv[1]))["results"]:
    print(sys.argv[2], res["command"], f'{res["median"]:.4f}', sep="\t")
EOF
  else
    printf '%s\tfd\t%s\n' "$r" "$(median_of fdfind -u -g '*.go' "$TREE")" >>"$WORK/rounds.tsv"
    printf '%s\tfind\t%s\n' "$r" "$(median_of find "$TREE" -name '*.go')" >>"$WORK/rounds.tsv"
    printf '%s\tfile_search\t%s\n' "$r" "$(median_of "$WORK/search.sh")" >>"$WORK/rounds.tsv"
  fi
done

log "bare walker"
WALKER=$("$WORK/walkbench" -root "$TREE" -pattern '*.go' -runs "$RUNS")
log "$WALKER"

MCP_MS=
if [ "${SKIP_MCP:-}" != 1 ]; then
  log "MCP filesystem server search_files (one call, ~20 s)"
  MCP_OUT=$(python3 "$BENCH_DIR/mcp_fs_bench.py" "$MCP_JS" "$(dirname "$TREE")" "$TREE")
  log "$MCP_OUT"
  MCP_MS=$(printf '%s\n' "$MCP_OUT" | sed -n 's/^search_files \*\*\/\*\.go: \([0-9]*\) ms.*/\1/p')
fi

python3 - "$WORK/rounds.tsv" "${MCP_MS:-}" "$WALKER" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
mcp = float(sys.argv[2]) / 1000 if sys.argv[2] else None
by = {}
for r, cmd, med in rows:
    by.setdefault(cmd, []).append(float(med))
med = {c: statistics.median(v) for c, v in by.items()}
print(f"\nfile_search benchmark: find *.go in the 200k tree ({sys.argv[4]} CPUs, load {sys.argv[5]})")
print(f"{'tool':<34}{'median s':>10}   per-round medians")
for c in ("fd", "find", "file_search"):
    label = {"fd": "fd -u -g '*.go'", "find": "find -name '*.go'", "file_search": "toolsvc file_search (HTTP, curl)"}[c]
    print(f"{label:<34}{med[c]:>10.3f}   " + " ".join(f"{x:.3f}" for x in by[c]))
if mcp is not None:
    print(f"{'MCP server search_files **/*.go':<34}{mcp:>10.3f}   (one call)")
print(sys.argv[3])
fs = med["file_search"]
rounds = [by["file_search"][i] / by["fd"][i] for i in range(len(by["fd"]))]
print(f"\nfile_search / fd   = {fs / med['fd']:.2f}x  (target <= 1.2x; per round: " + " ".join(f"{x:.2f}" for x in rounds) + ")")
print(f"file_search / find = {fs / med['find']:.2f}x")
if mcp is not None:
    print(f"MCP / file_search  = {mcp / fs:.0f}x faster  (target >= 30x)")
EOF
