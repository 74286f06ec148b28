#!/bin/sh
# bench-exec.sh measures what exec costs, side by side in one run:
#  1. an exec call of `true` through the whole HTTP call (a fresh service
#     per sandbox mode, default settings: audit log on, control groups,
#     and as root a PID and mount namespace per command) against the
#     kernel's floor for the same isolation, started from the client the
#     same way (scripts/execbench): none and landlock against
#     `unshare --pid --fork --mount sh -c true`, bwrap against a bare
#     `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all
#     --die-with-parent sh -c true`; and both against `sh -c true`; the
#     same in CPU time (the service's and its commands' against the floor
#     runs'), which a loaded machine stretches far less than wall time;
#  2. the peak RSS of the service while a command prints 1 GiB;
#  3. with NET=1, instead of 1 and 2: what exec's network setting costs per
#     call of `true`, in each sandbox mode of MODES (default "landlock
#     bwrap"): three services side by side, the network off (the default),
#     an allowlist (TOOLSVC_EXEC_NET_ALLOW: each command gets a network
#     namespace of its own whose only way out is the service's proxy) and
#     TOOLSVC_EXEC_NETWORK=true, called in turns (scripts/execnetbench:
#     ROUNDS rounds of N calls one after another per service, default 5 of
#     200), each round's medians compared with the one of "off" as ratios
#     and in milliseconds (target: the allowlist adds at most 1 ms a
#     call); then curl fetching a page from a loopback HTTP server
#     (scripts/barehttp) the allowlist names, through the proxy, against
#     the same curl with the whole network (CURL_N calls per round,
#     default 50): the proxy's cost for a real request, shown, with no
#     target (a proxied request makes one more hop). A mode the
#     machine lacks (or in which a setting does not start) is skipped with
#     the service's reason. Each service listens on a free loopback port
#     and has its own workspace and data folders. Back to back, a call
#     may wait for what the service makes ahead for the next command
#     once the last has ended (as root, with the allowlist, its network
#     namespace among it); GAP spaces the calls so that it is ready.
# Not root: none and landlock get no namespaces from the service, so
# their floor is `sh -c true`.
# Usage: scripts/bench-exec.sh [sandbox mode for the RSS run, default auto]
# N=calls per round (50), ROUNDS=rounds (3), MODES="none landlock bwrap";
# GAP=a pause before each call and each floor run (e.g. 250ms, default
# none): spaced calls, as an agent makes them, pay costs a burst hides;
# RSS=0 skips part 2. BASE=<git revision> also runs the service built from that revision,
# mode by mode right after this one's, for a before-and-after in one run
# (parts 1 and 2 only).
# NET=1 runs part 3 alone: N (200), ROUNDS (5), MODES (landlock bwrap),
# GAP, and CURL_N (50).
set -eu
cd "$(dirname "$0")/.."
mode=${1:-auto}
NET=${NET:-0}
if [ "$NET" != 0 ]; then
	N=${N:-200}
	ROUNDS=${ROUNDS:-5}
	MODES=${MODES:-landlock bwrap}
else
	N=${N:-50}
	ROUNDS=${ROUNDS:-3}
	MODES=${MODES:-none landlock bwrap}
fi

tmp=$(mktemp -d)
# pid is the service of parts 1 and 2, pids every process part 3 started.
# They are stopped by these IDs on any exit: a program started in the
# background of a script may ignore Ctrl-C (the shell starts it with
# SIGINT ignored), so the traps turn it (and TERM) into an exit that runs
# the cleanup.
pid=
pids=
cleanup() {
	for p in $pid $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pid $pids; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
go build -o "$tmp/toolsvc" ./cmd/toolsvc
if [ "$NET" != 0 ]; then
	go build -o "$tmp/execnetbench" ./scripts/execnetbench
	go build -o "$tmp/barehttp" ./scripts/barehttp
else
	go build -o "$tmp/execbench" ./scripts/execbench
fi
if [ -n "${BASE:-}" ]; then
	mkdir "$tmp/base"
	git archive "$BASE" | tar -x -C "$tmp/base"
	(cd "$tmp/base" && go build -o "$tmp/toolsvc-base" ./cmd/toolsvc)
fi
port=$((20000 + $$ % 20000))

# listen_port PID: the TCP port process PID listens on in this network
# namespace (a service given port 0 takes a free one), once it does.
listen_port() {
	i=0
	until lp=$(ss -Hltnp 2>/dev/null | grep "pid=$1," | awk '{n = split($4, a, ":"); print a[n]; exit}') && [ -n "$lp" ]; do
		# Gone, or ended and not yet waited for (a zombie).
		case $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) in "" | Z) return 1 ;; esac
		i=$((i + 1)); [ $i -lt 300 ] || return 1; sleep 0.1
	done
	echo "$lp"
}

# start_net NAME MODE [VAR=VALUE...]: a fresh service with exec in sandbox
# MODE and the given settings, on a free loopback port, with its own
# workspace and data folders under $tmp/NAME; sets svc to NAME,PID,URL
# for execnetbench, or returns 1 with the service's log shown when it
# does not start (a mode or setting this machine lacks).
start_net() {
	name=$1 smode=$2
	shift 2
	mkdir -p "$tmp/$name"
	env TOOLSVC_ADDR=127.0.0.1:0 TOOLSVC_WORKSPACE="$tmp/$name/ws" TOOLSVC_DATA_DIR="$tmp/$name/data" \
		TOOLSVC_EXEC_SANDBOX="$smode" TOOLSVC_EXEC_TIMEOUT=5m TOOLSVC_LOG_LEVEL=warn "$@" \
		"$tmp/toolsvc" >"$tmp/$name/log" 2>&1 &
	sp=$!
	pids="$pids $sp"
	if ! sport=$(listen_port "$sp"); then
		echo "$name ($smode) did not start:"; sed 's/^/  /' "$tmp/$name/log" | tail -n 5
		return 1
	fi
	i=0
	until curl -fsS "http://127.0.0.1:$sport/healthz" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/$name/log"; return 1; }; sleep 0.1
	done
	svc="$name,$sp,http://127.0.0.1:$sport"
}

# stop_net: ends every service part 3 started, by its process ID, and
# removes their folders (the HTTP server stays until the script ends).
stop_net() {
	for p in $pids; do [ "$p" = "${hpid:-}" ] || kill "$p" 2>/dev/null || true; done
	for p in $pids; do [ "$p" = "${hpid:-}" ] || wait "$p" 2>/dev/null || true; done
	pids=${hpid:-}
	rm -rf "$tmp/off" "$tmp/allow" "$tmp/net"
}

if [ "$NET" != 0 ]; then
	[ "$(id -u)" = 0 ] || echo "note: not root: the allowlist's namespaces are then made by each command in a user namespace of its own (netinit)"
	# The loopback HTTP server curl fetches from; the allowlist names it
	# as localhost:PORT, and NET_ALLOW_HOSTS lets the network guard pass
	# a listed name that resolves to loopback.
	mkdir -p "$tmp/www"
	echo hello >"$tmp/www/hello.txt"
	"$tmp/barehttp" -addr 127.0.0.1:0 -root "$tmp/www" >"$tmp/www.log" 2>&1 &
	hpid=$!
	pids=$hpid
	hport=$(listen_port "$hpid") || { cat "$tmp/www.log"; exit 1; }
	fetch="curl -q -4 -sS --max-time 10 -d '{\"path\":\"hello.txt\"}' http://localhost:$hport/"
	echo "== exec's network setting: off, allowlist (localhost:$hport), EXEC_NETWORK=true; $ROUNDS rounds of $N calls of true per service in turns, medians ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
	for m in $MODES; do
		if start_net off "$m" && offsvc=$svc &&
			start_net allow "$m" TOOLSVC_EXEC_NET_ALLOW="localhost:$hport" TOOLSVC_NET_ALLOW_HOSTS=localhost && allowsvc=$svc &&
			start_net net "$m" TOOLSVC_EXEC_NETWORK=true && netsvc=$svc; then
			echo "-- $m: exec of true"
			"$tmp/execnetbench" -n "$N" -rounds "$ROUNDS" -gap "${GAP:-0}" "$offsvc" "$allowsvc" "$netsvc"
			echo "-- $m: exec of $fetch (the whole network first, as the reference: the difference is the proxy's)"
			"$tmp/execnetbench" -target 0 -command "$fetch" -expect hello -n "${CURL_N:-50}" -rounds "$ROUNDS" -gap "${GAP:-0}" "$netsvc" "$allowsvc"
			echo "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
		else
			echo "-- $m: skipped"
		fi
		stop_net
	done
	exit 0
fi

# start MODE [BINARY]: a fresh service with exec in sandbox MODE, in $pid.
start() {
	rm -rf "$tmp/ws" "$tmp/data"
	TOOLSVC_ADDR=127.0.0.1:$port TOOLSVC_WORKSPACE=$tmp/ws TOOLSVC_DATA_DIR=$tmp/data \
		TOOLSVC_EXEC_SANDBOX=$1 TOOLSVC_EXEC_TIMEOUT=5m TOOLSVC_LOG_LEVEL=warn \
		"${2:-$tmp/toolsvc}" >"$tmp/log" 2>&1 &
	pid=$!
	i=0
	until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/log"; exit 1; }; sleep 0.1
	done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

echo "== exec call of true over HTTP vs the floor of its mode (median of $N per round, $ROUNDS rounds; lower is better)"
for m in $MODES; do
	case $m in
	bwrap) floor="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent sh -c true" ;;
	*) if [ "$(id -u)" = 0 ]; then floor="unshare --pid --fork --mount sh -c true"; else floor="sh -c true"; fi ;;
	esac
	start "$m"
	"$tmp/execbench" -url "http://127.0.0.1:$port" -pid "$pid" -label "$m" -floor "$floor" -n "$N" -rounds "$ROUNDS" -gap "${GAP:-0}"
	stop
	if [ -n "${BASE:-}" ]; then
		start "$m" "$tmp/toolsvc-base"
		"$tmp/execbench" -url "http://127.0.0.1:$port" -pid "$pid" -label "$m ($BASE)" -floor "$floor" -n "$N" -rounds "$ROUNDS" -gap "${GAP:-0}"
		stop
	fi
done

[ "${RSS:-1}" != 0 ] || exit 0
echo "== peak RSS while a command prints 1 GiB (sandbox $mode)"
start "$mode"
# One small call first so that the RSS measured before is the warm one.
curl -fsS -X POST "http://127.0.0.1:$port/tools/exec/invoke" -d '{"command":"true"}' >/dev/null
before=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
startpeak=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
# Reset the peak to the current RSS, so VmHWM below is the peak of the call.
echo 5 >/proc/$pid/clear_refs
t0=$(date +%s.%N)
curl -fsS -X POST "http://127.0.0.1:$port/tools/exec/invoke" \
	-d '{"command":"head -c 1073741824 /dev/zero | tr \"\\\\0\" a"}' >"$tmp/result.json"
t1=$(date +%s.%N)
peak=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
after=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
grep -o 'bytes of stdout cut here ([0-9]* bytes in all)' "$tmp/result.json" | head -n 1
echo "RSS before the call: $((before / 1024)) MiB (peak during start-up: $((startpeak / 1024)) MiB)"
echo "peak RSS during the 1 GiB call: $((peak / 1024)) MiB; after: $((after / 1024)) MiB; wall time $(echo "$t1 - $t0" | bc) s"
