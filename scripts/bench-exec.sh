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
#  2. the peak RSS of the service while a command prints 1 GiB.
# Not root: none and landlock get no namespaces from the service, so
# their floor is `sh -c true`.
# Usage: scripts/bench-exec.sh [sandbox mode for the RSS run, default auto]
# N=calls per round (50), ROUNDS=rounds (3), MODES="none landlock bwrap";
# GAP=a pause before each call and each floor run (e.g. 250ms, default
# none): spaced calls, as an agent makes them, pay costs a burst hides;
# RSS=0 skips part 2. BASE=<git revision> also runs the service built from that revision,
# mode by mode right after this one's, for a before-and-after in one run.
set -eu
cd "$(dirname "$0")/.."
mode=${1:-auto}
N=${N:-50}
ROUNDS=${ROUNDS:-3}
MODES=${MODES:-none landlock bwrap}

tmp=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/toolsvc" ./cmd/toolsvc
go build -o "$tmp/execbench" ./scripts/execbench
if [ -n "${BASE:-}" ]; then
	mkdir "$tmp/base"
	git archive "$BASE" | tar -x -C "$tmp/base"
	(cd "$tmp/base" && go build -o "$tmp/toolsvc-base" ./cmd/toolsvc)
fi
port=$((20000 + $$ % 20000))

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
