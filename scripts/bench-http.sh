#!/usr/bin/env bash
# Whole-process figures, side by side in one run (a small file takes a 4 KiB
# page on tmpfs: the tmpfs run holds some GiB of them for a while):
#  - read_file of a small file through toolsvc with the audit log on,
#    against a bare net/http handler that reads the same file and writes
#    one small file per request the way the audit log does (O_TMPFILE +
#    linkat: the floor of a file per call), and with the audit log off
#    against the plain bare handler; wrk from a second process, 16
#    connections and 1 connection; the data folders on the disk (under
#    /tmp) and, when a tmpfs can be mounted, on a tmpfs;
#  - idle memory: RSS and private memory (USS, smaps_rollup Private_*);
#  - toolsvc's server CPU time per call under wrk, and with one call at a
#    time from a Python client beside the bare handler and the reference MCP
#    filesystem server's per read_text_file call (needs node; skipped when
#    absent), and toolsvc's read_file through MCP against REST;
#  - the first 100 lines of a 1 GiB file against a small file, and peak RSS
#    while reading ranges of it.
# usage: scripts/bench-http.sh [seconds per wrk run, default 10]
# AUDIT_ONLY=1 stops after the read_file comparisons (tmpfs and disk);
# ROUNDS=n runs each read_file comparison n times (default 3).
# BASE=<git revision> also runs toolsvc built from that revision (audit
# on) in the same rounds, beside this one's, for a before-and-after in one
# run: its columns are added to the read_file tables.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
W=$(mktemp -d /tmp/toolsvc-bench.XXXXXX)
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  mountpoint -q "$W/tmpfs" 2>/dev/null && umount "$W/tmpfs"
  rm -rf "$W"
}
trap cleanup EXIT
. scripts/bench-servers.sh

rss() { awk '/^VmRSS/ {print $2/1024 " MiB"}' /proc/$1/status; }
hwm() { awk '/^VmHWM/ {print $2/1024 " MiB"}' /proc/$1/status; }
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
# uss PID: private memory and what it is made of, from smaps_rollup.
uss() {
  awk '/^Rss:/ {r = $2} /^Private_Clean:/ {pc = $2} /^Private_Dirty:/ {pd = $2} /^Anonymous:/ {a = $2} /^Shared_Clean:/ {sc = $2}
    END {printf "USS %.1f MiB (private dirty %.1f, private clean %.1f; anonymous %.1f), RSS %.1f MiB (shared clean %.1f)\n",
      (pc + pd) / 1024, pd / 1024, pc / 1024, a / 1024, r / 1024, sc / 1024}' /proc/$1/smaps_rollup
}
ready() { for _ in $(seq 100); do curl -sf "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "not ready: $1"; exit 1; }

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
TCK=$(getconf CLK_TCK)
percall() { awk -v d="$1" -v n="$2" -v t="$TCK" 'BEGIN {printf "%.0f us", d / t / n * 1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

# start_set BASEPORT DATAROOT: toolsvc with the audit log on (BASEPORT),
# the bare handler (+1), toolsvc with it off (+2), the bare handler
# writing a file per request (+3), all with their data under DATAROOT; with
# BASE, toolsvc of that revision with the audit log on (+4).
start_set() {
  local p=$1 d=$2
  DATA=$d
  mkdir -p "$d/on" "$d/off" "$d/bare-files" "$d/base"
  BSVC=
  if [ -n "${BASE:-}" ]; then
    TOOLSVC_ADDR=127.0.0.1:$((p + 4)) TOOLSVC_WORKSPACE="$W/ws" TOOLSVC_DATA_DIR="$d/base" "$W/toolsvc-base" > "$d/base.log" &
    BSVC=$!
    ready http://127.0.0.1:$((p + 4))/healthz
  fi
  TOOLSVC_ADDR=127.0.0.1:$p TOOLSVC_WORKSPACE="$W/ws" TOOLSVC_DATA_DIR="$d/on" "$W/toolsvc" > "$d/on.log" &
  SVC=$!
  "$W/barehttp" -addr 127.0.0.1:$((p + 1)) -root "$W/ws" &
  BARE=$!
  TOOLSVC_ADDR=127.0.0.1:$((p + 2)) TOOLSVC_WORKSPACE="$W/ws" TOOLSVC_DATA_DIR="$d/off" TOOLSVC_AUDIT_ENABLED=false "$W/toolsvc" > "$d/off.log" &
  OFF=$!
  "$W/barehttp" -addr 127.0.0.1:$((p + 3)) -root "$W/ws" -files "$d/bare-files" &
  BFILE=$!
  ready http://127.0.0.1:$p/healthz
  ready http://127.0.0.1:$((p + 2))/healthz
  for q in 1 3; do for _ in $(seq 50); do curl -s http://127.0.0.1:$((p + q))/ -d "$SMALL" >/dev/null && break; sleep 0.1; done; done
  curl -s http://127.0.0.1:$p/tools/read_file/invoke -d "$SMALL" | grep -q '"status":"success"' || { echo "toolsvc read_file failed"; exit 1; }
  [ -z "$BSVC" ] || curl -s http://127.0.0.1:$((p + 4))/tools/read_file/invoke -d "$SMALL" | grep -q '"status":"success"' || { echo "base toolsvc read_file failed"; exit 1; }
}
stop_set() { kill $SVC $BARE $OFF $BFILE $BSVC; wait $SVC $BARE $OFF $BFILE $BSVC 2>/dev/null || true; }

# compare BASEPORT: the read_file table for the set started on BASEPORT.
# The four servers take turns, ROUNDS times (default 3), and the ratios
# are the median of each round's: the machine's other load changes
# between runs, less within one round.
# measure PID URL CONNS -> "calls/s server-CPU-us-per-call"
measure() {
  local c0 c1 r n
  c0=$(cpu $1)
  read -r r n < <(run "$2" "$3" "$SMALL")
  c1=$(cpu $1)
  echo "$r $(awk -v d=$((c1 - c0)) -v n="$n" -v t="$TCK" 'BEGIN {printf "%.0f", d / t / n * 1e6}')"
}
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
compare() {
  local p=$1 rounds=${ROUNDS:-3} n=12
  local fmt='%-6s %10s %10s %10s %10s %8s %8s %8s %8s %8s %8s %8s %8s'
  echo "calls/s, their ratios, then server CPU time per call in us and its ratios (the goal: cpu on/b+f <= 1.3):"
  if [ -n "$BSVC" ]; then
    echo "base: toolsvc of $BASE, audit on"
    fmt="$fmt %10s %8s %8s"
    n=15
    printf "$fmt\n" conns bare+file "audit on" bare "audit off" "on/b+f" "off/bare" "cpu b+f" "cpu on" "cpu bare" "cpu off" "cpu on/b+f" "cpu off/bare" "base" "cpu base" "cpu base/b+f"
  else
    printf "$fmt\n" conns bare+file "audit on" bare "audit off" "on/b+f" "off/bare" "cpu b+f" "cpu on" "cpu bare" "cpu off" "cpu on/b+f" "cpu off/bare"
  fi
  for c in 16 1; do
    : > "$W/r"
    for _ in $(seq "$rounds"); do
      read -r f fc < <(measure $BFILE http://127.0.0.1:$((p + 3))/ $c)
      read -r s sc < <(measure $SVC http://127.0.0.1:$p/tools/read_file/invoke $c)
      read -r b bc < <(measure $BARE http://127.0.0.1:$((p + 1))/ $c)
      read -r o oc < <(measure $OFF http://127.0.0.1:$((p + 2))/tools/read_file/invoke $c)
      extra=
      if [ -n "$BSVC" ]; then
        read -r x xc < <(measure $BSVC http://127.0.0.1:$((p + 4))/tools/read_file/invoke $c)
        extra="$x $xc $(ratio "$xc" "$fc")"
      fi
      echo "$f $s $b $o $(ratio "$s" "$f") $(ratio "$o" "$b") $fc $sc $bc $oc $(ratio "$sc" "$fc") $(ratio "$oc" "$bc") $extra" >> "$W/r"
      printf "$fmt\n" "$c" $(tail -1 "$W/r")
      # On a tmpfs the records of the round go: a small file takes a
      # 4 KiB page there, and it fills up in a few rounds. Not on a disk:
      # on ext4 a file made where many were lately deleted costs several
      # times more, and the figures would measure that.
      if [ "$(fstype "$DATA")" = tmpfs ]; then
        find "$DATA" -type f -name '*.json' -delete 2>/dev/null || true
      fi
    done
    printf "$fmt\n" "median" $(for k in $(seq $n); do awk -v k=$k '{print $k}' "$W/r" | median; done | tr '\n' ' ')
  done
}

fstype() { findmnt -n -o FSTYPE -T "$1"; }
echo "read_file small.txt, wrk -t1, ${DUR}s each (calls/s); audit on vs bare+file, audit off vs bare"
if mkdir -p "$W/tmpfs" && mount -t tmpfs -o size=8g tmpfs "$W/tmpfs" 2>/dev/null; then
  start_set 18090 "$W/tmpfs"
  echo
  echo "data on $(fstype "$W/tmpfs") ($W/tmpfs):"
  compare 18090
  stop_set
else
  echo "(no tmpfs: mount refused; only the disk)"
fi
mkdir -p "$W/disk"
start_set 18080 "$W/disk"
sleep 1
echo
echo "idle, toolsvc audit on:  $(uss $SVC)"
echo "idle, toolsvc audit off: $(uss $OFF)"
echo
echo "data on $(fstype "$W/disk") ($W/disk):"
compare 18080
[ "${AUDIT_ONLY:-}" = 1 ] && exit 0
sleep 10
echo
echo "idle 10 s after the runs, toolsvc audit on:  $(uss $SVC)"
echo "idle 10 s after the runs, toolsvc audit off: $(uss $OFF)"
sleep 50
echo "idle 60 s after the runs, toolsvc audit on:  $(uss $SVC)"
echo "idle 60 s after the runs, toolsvc audit off: $(uss $OFF)"

echo
echo "one call at a time from a Python client, as the MCP server is driven below:"
python3 scripts/bench-http-cpu.py "bare read small.txt" 127.0.0.1 18081 / "$SMALL" $BARE 2000
python3 scripts/bench-http-cpu.py "toolsvc read_file small.txt" 127.0.0.1 18080 /tools/read_file/invoke "$SMALL" $SVC 2000
python3 scripts/bench-mcp-rest-cpu.py 18080 $SVC 2000
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
