#!/usr/bin/env bash
# Instructions and system calls per call, for read_file of a small file with
# the audit log on, against the bare handler that writes a file per call
# (scripts/barehttp -files): the same comparison as bench-http.sh's
# "cpu on/b+f" column, counted instead of timed.
#
# Each server runs under valgrind's callgrind with counting off; after 300
# calls to warm it up, counting is switched on for N calls (default 2000)
# from one Python client on a kept-alive connection, one call at a time.
# callgrind counts the instructions the process runs in user space, the
# same for the same binary and inputs whatever else the machine is doing,
# which wall-clock CPU figures on a shared machine are not. The kernel's
# side is given as the number of system calls per call, counted by strace
# over another N calls (without callgrind).
#
# Go needs three settings under valgrind 3.19: GODEBUG=cpu.rdtscp=off (it
# does not know RDTSCP), asyncpreemptoff=1 (callgrind fails on the
# preemption signals) and GOMAXPROCS=1 (without it the threads that spin
# looking for work while the server waits for the client are counted, and
# one round came out at 3.4x the others). They change the runtime a
# little, the same way for both servers.
#
# usage: scripts/bench-http-instr.sh [N]
# BASE=<git revision> also counts toolsvc built from that revision.
# ROUNDS=n counts each server n times (default 3) and gives the medians:
# the counts still move by a few per cent between runs, with what the
# client's timing does to the scheduler (a read that waits parks the
# goroutine, one that does not, does not).
# KEEP=1 keeps the callgrind files (their folder is printed), for
# callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
for p in valgrind:valgrind strace:strace python3:python3; do
  command -v "${p%%:*}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${p##*:}" >/dev/null; }
done
W=$(mktemp -d /tmp/toolsvc-instr.XXXXXX)
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "callgrind files kept in $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
. scripts/bench-servers.sh

cat > "$W/client.py" <<'PY'
import http.client, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(n):
    c.request("POST", path, b'{"path":"small.txt"}', {"Content-Type": "application/json"})
    r = c.getresponse()
    d = r.read()
    if r.status != 200 or b'"success"' not in d and path != "/":
        sys.exit(f"HTTP {r.status}: {d[:200]!r}")
PY
ready() { for _ in $(seq 300); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "not ready: $1"; exit 1; }

# count NAME PORT PATH ROUND -- command...: prints "NAME instructions/call
# syscalls/call" for one round
count() {
  local name=$1 port=$2 path=$3 round=$4
  shift 5
  local out="$W/$name.$round.cg"
  GOMAXPROCS=1 GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 valgrind -q --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$out" "$@" > "$W/$name.log" 2>&1 &
  local vg=$!
  ready "http://127.0.0.1:$port/"
  python3 "$W/client.py" "$port" "$path" 300
  callgrind_control -z "$vg" >/dev/null 2>&1
  callgrind_control -i on "$vg" >/dev/null 2>&1
  python3 "$W/client.py" "$port" "$path" "$N"
  callgrind_control -i off "$vg" >/dev/null 2>&1
  callgrind_control -d "$vg" >/dev/null 2>&1
  kill "$vg"
  wait "$vg" 2>/dev/null || true
  local ir
  ir=$(cat "$out".* 2>/dev/null | awk '/^totals:/ {t = $2} END {print t + 0}')
  [ "$ir" -gt 0 ] || { echo "$name: no count (see $W/$name.log)"; cat "$W/$name.log"; exit 1; }

  # System calls, over another N calls without valgrind.
  "$@" > "$W/$name.log2" 2>&1 &
  local pid=$!
  ready "http://127.0.0.1:$port/"
  python3 "$W/client.py" "$port" "$path" 300
  strace -f -c -o "$W/$name.strace" -p "$pid" 2>/dev/null &
  local st=$!
  sleep 1
  python3 "$W/client.py" "$port" "$path" "$N"
  kill -INT "$st"
  wait "$st" 2>/dev/null || true
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local sc
  sc=$(awk '$NF == "total" {print $4}' "$W/$name.strace")
  awk -v n="$name" -v i="$ir" -v s="$sc" -v c="$N" 'BEGIN {printf "%-10s %12.0f %12.1f\n", n, i / c, s / c}'
}

printf '%-10s %12s %12s\n' server instr/call syscalls/call
for round in $(seq "${ROUNDS:-3}"); do
  count bare+file 18191 / "$round" -- "$W/barehttp" -addr 127.0.0.1:18191 -root "$W/ws" -files "$W/bare-files"
  (
    export TOOLSVC_ADDR=127.0.0.1:18190 TOOLSVC_WORKSPACE="$W/ws" TOOLSVC_DATA_DIR="$W/data"
    count toolsvc 18190 /tools/read_file/invoke "$round" -- "$W/toolsvc"
    if [ -n "${BASE:-}" ]; then
      export TOOLSVC_ADDR=127.0.0.1:18192 TOOLSVC_DATA_DIR="$W/data-base"
      count base 18192 /tools/read_file/invoke "$round" -- "$W/toolsvc-base"
    fi
  )
done | tee "$W/table"
echo "medians:"
awk '{i[$1] = i[$1] " " $2; s[$1] = s[$1] " " $3; if (!($1 in seen)) {seen[$1] = 1; order[++n] = $1}}
  function median(list,   a, k, t, j) {
    k = split(list, a, " ")
    for (t = 2; t <= k; t++) for (j = t; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {x = a[j]; a[j] = a[j - 1]; a[j - 1] = x}
    return a[int((k + 1) / 2)]
  }
  END {
    bi = median(i["bare+file"]); bs = median(s["bare+file"])
    for (k = 1; k <= n; k++) {
      m = median(i[order[k]]); ms = median(s[order[k]])
      printf "%-10s %12.0f %12.1f", order[k], m, ms
      if (order[k] != "bare+file") printf "   /bare+file: instructions %.2fx, system calls %.2fx", m / bi, ms / bs
      printf "\n"
    }
  }' "$W/table"
