#!/usr/bin/env bash
# compose-up.sh builds the image and starts the service with
# deploy/compose.yaml, then waits until its health check passes. It exits
# non-zero, with what the engine said and the container's last log lines,
# when the container could not be created or started, stopped or restarted,
# or was not healthy in time: compose's own exit status does not tell.
# podman-compose (1.0 at least) exits 0 when podman fails to create or
# start the container, and `up -d` of either engine returns as soon as the
# container is started, before a bad setting stops the service.
#
# Usage, from anywhere in the checkout: scripts/compose-up.sh [UP-OPTION...]
# (the options go to compose's `up`).
#
# The engine: docker compose where it answers, else podman-compose; or
# the command COMPOSE names (COMPOSE=podman-compose, COMPOSE="docker
# compose"). Also read:
#   COMPOSE_PROJECT_NAME  the project (default deploy, compose's own
#                         default for deploy/compose.yaml)
#   BUILD_VERSION         the version the image reports (default: git
#                         describe of this checkout, else devel)
#   COMPOSE_UP_TIMEOUT    seconds to wait for the health check (default 120)
set -euo pipefail
cd "$(dirname "$0")/.."

file=deploy/compose.yaml
service=toolsvc
project=${COMPOSE_PROJECT_NAME:-deploy}
timeout=${COMPOSE_UP_TIMEOUT:-120}
BUILD_VERSION=${BUILD_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
export BUILD_VERSION

say() { echo "compose-up: $*" >&2; }

if [ -n "${COMPOSE:-}" ]; then
	read -ra compose <<<"$COMPOSE"
elif docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v podman-compose >/dev/null 2>&1; then
	compose=(podman-compose)
else
	say "neither docker compose nor podman-compose is installed (or set COMPOSE to the compose command)"
	exit 1
fi
case ${compose[0]} in
podman*) engine=podman ;;
*) engine=docker ;;
esac

up=(up -d --build)
if [ "$engine" = podman ]; then
	# podman-compose does not replace a container that exists: it starts
	# the old one again, on the old image. Recreating it (its volumes
	# stay) runs what was just built, as docker compose does.
	up+=(--force-recreate)
	# podman builds in the OCI format unless told otherwise, and that
	# format has no HEALTHCHECK: the docker format keeps the image's own
	# for a later `podman run`, and shares the layers of the image
	# scripts/container-test.sh builds.
	export BUILDAH_FORMAT=${BUILDAH_FORMAT:-docker}
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
say "${compose[*]} -p $project -f $file ${up[*]} $* (version $BUILD_VERSION)"
rc=0
"${compose[@]}" -p "$project" -f "$file" "${up[@]}" "$@" 2>&1 | tee "$out" || rc=$?

# The errors the engine printed, but for the lookups compose makes before
# it creates a missing volume or network.
engine_errors() { grep -iE '^(Error|error)[: ]|level=(error|fatal)' "$out" | grep -vE 'no such (volume|network|container)|systemd connection' | tail -5 >&2 || true; }

if [ "$rc" -ne 0 ]; then
	say "FAIL: ${compose[*]} up exited $rc"
	exit "$rc"
fi
# podman-compose goes on to start the image it had when the build fails,
# and exits 0: its output, each podman command followed by "exit code: N",
# says whether the build did.
if [ "$engine" = podman ] && ! awk '/^podman build /{b=1; next} b && /^exit code: /{if ($3 != 0) bad=1; b=0} END{exit bad}' "$out"; then
	engine_errors
	if c=$(podman ps -a -q --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$service") && [ -n "$c" ]; then
		podman stop -t 10 $c >/dev/null 2>&1 || true
	fi
	say "FAIL: the image build failed (see its output above); the container, if any, runs an older image and is stopped"
	exit 1
fi
c=$("$engine" ps -a -q --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$service" | head -1)
if [ -z "$c" ]; then
	engine_errors
	say "FAIL: compose made no container for the service $service (project $project); see the output above"
	exit 1
fi
name=$("$engine" inspect -f '{{.Name}}' "$c")
name=${name#/}

# stop_for_good stops the container until it stays stopped: podman (4.3)
# may start it again when the stop comes between one exit of a restart
# loop and the next start, and says nothing.
stop_for_good() {
	local i st
	for i in 1 2 3 4 5 6 7 8 9 10; do
		"$engine" stop -t 10 "$c" >/dev/null 2>&1 || true
		sleep 1
		st=$("$engine" inspect -f '{{.State.Status}}' "$c" 2>/dev/null) || return 0
		case $st in
		exited | stopped | created | dead) sleep 1 ;;
		*) continue ;;
		esac
		st=$("$engine" inspect -f '{{.State.Status}}' "$c" 2>/dev/null) || return 0
		case $st in
		exited | stopped | created | dead) return 0 ;;
		esac
	done
	say "could not stop $name: it is $st"
}

# fail WHY: what the engine knows of the container, its last log lines
# (once each: a service the restart policy starts again repeats them),
# and a non-zero exit. A container that stopped is stopped for good, so
# that its restart policy does not go on starting it in the background.
fail() {
	engine_errors
	"$engine" logs --tail 30 "$c" 2>&1 | uniq >&2 || true
	say "FAIL: $name $1"
	say "state: $("$engine" inspect -f 'status={{.State.Status}} exit_code={{.State.ExitCode}} restarts={{.RestartCount}} error={{.State.Error}}' "$c" 2>&1)"
	if [ "${restarts:-0}" != 0 ] || [ "${status:-running}" != running ]; then
		stop_for_good
	fi
	say "the log: $engine logs $name; remove it: ${compose[*]} -p $project -f $file down"
	exit 1
}

# podman runs health checks from systemd timers, and where there is no
# systemd nothing runs them: here each check is run by hand, which also
# records the status `podman ps` shows. Docker runs them itself (the first
# after the compose file's interval, 30 s).
deadline=$((SECONDS + timeout))
while :; do
	status= restarts=
	read -r status restarts < <("$engine" inspect -f '{{.State.Status}} {{.RestartCount}}' "$c" 2>/dev/null) || true
	# The restart policy starts a service that stopped again: a restart
	# this soon is a failed start.
	[ "${restarts:-0}" = 0 ] || fail "stopped and was restarted ($restarts times) before its health check passed"
	[ "${status:-gone}" = running ] || fail "is ${status:-gone}, not running"
	if [ "$engine" = podman ]; then
		if podman healthcheck run "$c" >/dev/null 2>&1; then break; fi
	else
		health=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$c")
		case $health in
		healthy | "") break ;;
		unhealthy) fail "is unhealthy" ;;
		esac
	fi
	[ "$SECONDS" -lt "$deadline" ] || fail "was not healthy in $timeout s"
	sleep 1
done
say "$name is healthy, on $("$engine" port "$c" 8080/tcp | head -1) (version $BUILD_VERSION)"
