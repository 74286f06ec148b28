#!/usr/bin/env bash
# Whole-process cost of a call through toolsvc, side by side in one run:
#  - read_file of a small file through toolsvc (audit on, default config)
#    against a bare net/http handler that reads the same file, with wrk from
#    a second process, 16 connections and 1 connection;
#  - toolsvc's server CPU time per call under wrk, and with one call at a
#    time from a Python client beside the bare handler and the reference MCP
#    filesystem server's per read_text_file call (needs node; skipped when
#    absent);
#  - the first 100 lines of a 1 GiB file against a small file, and peak RSS
#    while reading ranges of it; idle RSS.
# usage: scripts/bench-http.sh [seconds per wrk run, default 10]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
W=$(mktemp -d /tmp/toolsvc-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/ws" "$W/data"
go build -o "$W/toolsvc" ./cmd/toolsvc
go build -o "$W/barehttp" ./scripts/barehttp
printf 'hello\n%.0s' {1..10} > "$W/ws/small.txt"

TOOLSVC_ADDR=127.0.0.1:18080 TOOLSVC_WORKSPACE="$W/ws" TOOLSVC_DATA_DIR="$W/data" "$W/toolsvc" > "$W/toolsvc.log" &
SVC=$!
"$W/barehttp" -addr 127.0.0.1:18081 -root "$W/ws" &
BARE=$!
mkdir -p "$W/data-noaudit"
TOOLSVC_ADDR=127.0.0.1:18082 TOOLSVC_WORKSPACE="$W/ws" TOOLSVC_DATA_DIR="$W/data-noaudit" TOOLSVC_AUDIT_ENABLED=false "$W/toolsvc" > "$W/toolsvc-noaudit.log" &
for _ in $(seq 50); do curl -sf http://127.0.0.1:18080/healthz >/dev/null && curl -s http://127.0.0.1:18081/ -d '{"path":"small.txt"}' >/dev/null && break; sleep 0.1; done
sleep 1
rss() { awk '/^VmRSS/ {print $2/1024 " MiB"}' /proc/$1/status; }
hwm() { awk '/^VmHWM/ {print $2/1024 " MiB"}' /proc/$1/status; }
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
echo "idle RSS: toolsvc $(rss $SVC)"

cat > "$W/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("BODY")
LUA
# run URL CONNS BODY -> prints "requests/s requests"
run() {
  BODY="$3" wrk -t1 -c"$2" -d"${DUR}s" -s "$W/post.lua" "$1" |
    awk '/requests in/ {n = $1} /Requests\/sec/ {r = $2} END {printf "%.0f %d\n", r, n}'
}
SMALL='{"path":"small.txt"}'
curl -s http://127.0.0.1:18080/tools/read_file/invoke -d "$SMALL" | grep -q '"status":"success"' || { echo "toolsvc read_file failed"; exit 1; }
TCK=$(getconf CLK_TCK)
echo
echo "read_file small.txt, wrk -t1, ${DUR}s each (calls/s):"
printf '%-6s %10s %10s %7s %16s %18s %14s\n' conns bare toolsvc ratio "toolsvc CPU/call" "toolsvc audit off" "bare CPU/call"
percall() { awk -v d="$1" -v n="$2" -v t="$TCK" 'BEGIN {printf "%.0f us", d / t / n * 1e6}'; }
for c in 16 1; do
  b0=$(cpu $BARE)
  read -r b bn < <(run http://127.0.0.1:18081/ $c "$SMALL")
  b1=$(cpu $BARE)
  c0=$(cpu $SVC)
  read -r s n < <(run http://127.0.0.1:18080/tools/read_file/invoke $c "$SMALL")
  c1=$(cpu $SVC)
  read -r o _ < <(run http://127.0.0.1:18082/tools/read_file/invoke $c "$SMALL")
  printf '%-6s %10s %10s %7s %16s %18s %14s\n' "$c" "$b" "$s" "$(awk -v a="$s" -v b="$b" 'BEGIN {printf "%.2f", a/b}')" \
    "$(percall $((c1 - c0)) "$n")" "$o" "$(percall $((b1 - b0)) "$bn")"
done

echo
echo "one call at a time from a Python client, as the MCP server is driven below:"
python3 scripts/bench-http-cpu.py "bare read small.txt" 127.0.0.1 18081 / "$SMALL" $BARE 2000
python3 scripts/bench-http-cpu.py "toolsvc read_file small.txt" 127.0.0.1 18080 /tools/read_file/invoke "$SMALL" $SVC 2000
MCP=/tmp/peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
if command -v node >/dev/null && { [ -f "$MCP" ] || bash ../shared/bench/setup-peers.sh >/dev/null 2>&1; } && [ -f "$MCP" ]; then
  mkdir -p "$W/mcp"
  python3 scripts/bench-mcp-cpu.py "$MCP" "$W/mcp" 2000
else
  echo "mcp peer: not installed (node and npm needed); skipped"
fi

echo
echo "1 GiB file (first 100 lines) against small.txt (first 100 lines), wrk -c1:"
yes 'a line of log text that is about sixty characters long........' | head -c 1073741824 > "$W/ws/big.txt" || true
BIG='{"path":"big.txt","start_line":1,"end_line":100}'
SMALLR='{"path":"small.txt","start_line":1,"end_line":100}'
curl -s http://127.0.0.1:18080/tools/read_file/invoke -d "$BIG" | grep -q '"status":"success"' || { echo "read of big.txt failed"; exit 1; }
read -r s _ < <(run http://127.0.0.1:18080/tools/read_file/invoke 1 "$SMALLR")
read -r b _ < <(run http://127.0.0.1:18080/tools/read_file/invoke 1 "$BIG")
echo "small: $s calls/s, 1 GiB: $b calls/s, time ratio big/small: $(awk -v a="$s" -v b="$b" 'BEGIN {printf "%.2f", a/b}')"
for range in '"start_line":1,"end_line":100' '"start_line":8000000,"end_line":8000100' '"start_line":16000000,"end_line":16000100' '"start_line":16777000'; do
  curl -s http://127.0.0.1:18080/tools/read_file/invoke -d "{\"path\":\"big.txt\",$range}" -o /dev/null
done
echo "peak RSS after reading ranges across the 1 GiB file: $(hwm $SVC)"
