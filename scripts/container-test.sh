#!/usr/bin/env bash
# container-test.sh builds deploy/Dockerfile with podman, the image and its
# Node variant (--target node), and checks them on a real engine: health
# (HEALTHCHECK and GET /healthz through the published port), a tool call, a
# web screenshot of a page this script serves, exec under the sandbox
# docs/deploy.md promises (Landlock, under Docker's own default seccomp
# profile as well as podman's), that the service runs as a user other than
# root, that a tools file the guard must refuse is refused, the network
# allowlist (TOOLSVC_EXEC_NET_ALLOW) under podman's profile, Docker's and
# Docker's with the one rule docs/deploy.md adds (npm and npx through it),
# and the same checks through deploy/compose.yaml, started by the README's
# own commands (scripts/compose-up.sh, with podman-compose), running the
# Node variant with a tools file mounted read-only: its command tool, an
# MCP server from npm started by npx with the registry as its only
# network, node and npx through exec; then that command must fail, with
# the service's message, when a setting stops the service.
#
# No image can be pulled here, so the base images are made: a Debian
# bookworm minbase root file system (debootstrap, from the apt mirror) is
# imported as debian:bookworm-slim, and the same plus this machine's Go
# toolchain as golang:1.26-bookworm. The root file systems are kept in
# TOOLSVC_CONTAINER_CACHE (default ~/.cache/toolsvc-container) and the
# images and build layers in podman's storage, so a second run only
# rebuilds what changed.
#
# Needs root (podman with runc; debootstrap). Missing Debian packages are
# installed with apt-get.
# Usage: scripts/container-test.sh [build|check]
#   build: the base images and the image (scripts/test.sh runs this part
#          in the background, beside the compile checks); check: the
#          checks of an image built so; neither: both.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-all}
case $mode in
all | build | check) ;;
*)
	echo "usage: $0 [build|check]" >&2
	exit 2
	;;
esac

if [ "$(id -u)" -ne 0 ]; then
	echo "container-test: needs root (rootful podman, debootstrap)" >&2
	exit 1
fi
start=$(date +%s)
log() { echo "container-test: [$(($(date +%s) - start))s] $*"; }
fail() {
	echo "container-test: FAIL: $*" >&2
	exit 1
}

need=()
for p in podman:podman runc:runc debootstrap:debootstrap podman-compose:podman-compose curl:curl; do
	command -v "${p%%:*}" >/dev/null || need+=("${p#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

cache=${TOOLSVC_CONTAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolsvc-container}
mkdir -p "$cache"
# crun fails on this machine's cgroup setup and the nproc/nofile ulimits
# podman sets by default (1048576) are refused to a root without
# CAP_SYS_RESOURCE: a containers.conf of our own, not the system's, for the
# builds. The containers this script runs get compose.yaml's ulimits
# instead (hardening below), and podman-compose runs with runc alone
# (compose_conf), so that compose.yaml is checked to start on its own.
cat >"$cache/containers.conf" <<'EOF'
[containers]
default_ulimits = []

[engine]
runtime = "runc"
EOF
printf '[engine]\nruntime = "runc"\n' >"$cache/containers-compose.conf"
export CONTAINERS_CONF=$cache/containers.conf
compose_conf=$cache/containers-compose.conf
mirror=${TOOLSVC_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
image=localhost/toolsvc:container-test
node_image=localhost/toolsvc:container-test-node
# The version the image reports: the checkout's, as git describes it.
version=$(git describe --tags --always --dirty 2>/dev/null || echo devel)

# import_image NAME ID TAR [--change ...]: imports TAR as NAME unless the
# image there was made from the same ID (the label toolsvc.test.source).
import_image() {
	local name=$1 id=$2 tar=$3
	shift 3
	if [ "$(podman image inspect --format '{{index .Config.Labels "toolsvc.test.source"}}' "$name" 2>/dev/null)" = "$id" ]; then
		return
	fi
	log "importing $name"
	podman import -q --change "LABEL toolsvc.test.source=$id" "$@" "$tar" "$name" >/dev/null
}

# build_image makes the base images and builds the image.
build_image() {
	# The runtime base: Debian bookworm minbase.
	base_tar=$cache/bookworm-minbase.tar
	if [ ! -s "$base_tar" ]; then
		log "debootstrap bookworm minbase (first run only)"
		rm -rf "$cache/rootfs.tmp"
		debootstrap --variant=minbase bookworm "$cache/rootfs.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
			fail "debootstrap failed; see $cache/debootstrap.log"
		# As in Debian's own images: updates and security too.
		rm -f "$cache/rootfs.tmp/etc/apt/sources.list"
		cat >"$cache/rootfs.tmp/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${TOOLSVC_TEST_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
		chroot "$cache/rootfs.tmp" apt-get clean
		tar --numeric-owner -C "$cache/rootfs.tmp" -cf "$base_tar.tmp" .
		mv "$base_tar.tmp" "$base_tar"
		rm -rf "$cache/rootfs.tmp"
	fi
	base_id=$(stat -c %Y-%s "$base_tar")

	import_image debian:bookworm-slim "$base_id" "$base_tar" --change 'CMD ["bash"]'

	# The build base: the same plus this machine's Go toolchain and its CA
	# bundle (the build reaches the Go module proxy).
	goroot=$(go env GOROOT)
	gover=$(go env GOVERSION)
	build_tar=$cache/golang-$gover-bookworm.tar
	if [ ! -s "$build_tar" ] || [ "$build_tar" -ot "$base_tar" ]; then
		log "making the build base with $gover"
		cp "$base_tar" "$build_tar.tmp"
		tar --numeric-owner -rf "$build_tar.tmp" -C "$goroot" --transform 's,^\.,./usr/local/go,' .
		tar -rf "$build_tar.tmp" -C / etc/ssl/certs/ca-certificates.crt
		mv "$build_tar.tmp" "$build_tar"
	fi
	import_image golang:1.26-bookworm "$base_id-$gover" "$build_tar" \
		--change 'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV GOPATH=/go' --change 'ENV GOTOOLCHAIN=local' --change 'WORKDIR /go'

	log "podman build (version $version)"
	podman build --pull=never --jobs 2 --format docker --build-arg "VERSION=$version" -f deploy/Dockerfile -t "$image" . >"$cache/build.log" 2>&1 ||
		{
			tail -40 "$cache/build.log" >&2
			fail "podman build failed; see $cache/build.log"
		}
	# The Node variant: every stage but its own comes from the cache of the
	# build above, and its Node install from the cache of the last run
	# unless the base changed (a change to the Go sources rebuilds only the
	# binary's layer on top).
	local t0=$SECONDS
	podman build --pull=never --jobs 2 --format docker --build-arg "VERSION=$version" --target node -f deploy/Dockerfile -t "$node_image" . >"$cache/build-node.log" 2>&1 ||
		{
			tail -40 "$cache/build-node.log" >&2
			fail "podman build --target node failed; see $cache/build-node.log"
		}
	log "built the Node variant in $((SECONDS - t0)) s"
	# The image's size is held: deploy/Dockerfile keeps out what the service
	# never reads (docs, translations, apt's lists and caches, the GPU
	# drivers). 900 MB, decimal.
	size=$(podman image inspect --format '{{.Size}}' "$image")
	log "built a $((size / 1000000)) MB image"
	if [ "$size" -gt 900000000 ]; then
		podman history --format '{{.Size}}\t{{.CreatedBy}}' "$image" | cut -c1-160 >&2
		fail "the image is $((size / 1000000)) MB, over 900 MB: see its layers above"
	fi
	# The Node variant is the image's root file system, a layer of Debian's
	# nodejs and npm (about 160 MB) and the binary's.
	local node_size
	node_size=$(podman image inspect --format '{{.Size}}' "$node_image")
	log "built a $((node_size / 1000000)) MB Node variant"
	if [ "$node_size" -gt 1100000000 ]; then
		podman history --format '{{.Size}}\t{{.CreatedBy}}' "$node_image" | cut -c1-160 >&2
		fail "the Node variant is $((node_size / 1000000)) MB, over 1100 MB: see its layers above"
	fi
	[ "$(podman image inspect --format '{{index .RootFS.Layers 0}}' "$image")" = "$(podman image inspect --format '{{index .RootFS.Layers 0}}' "$node_image")" ] ||
		fail "the Node variant does not share the image's root file system layer"
}

if [ "$mode" != check ]; then
	build_image
	[ "$mode" = build ] && exit 0
elif ! podman image exists "$image" || ! podman image exists "$node_image"; then
	fail "no image $image or $node_image to check: run scripts/container-test.sh build first"
fi

work=$(mktemp -d)
containers=()
web_pid=
cleanup() {
	for c in "${containers[@]}"; do podman rm -f -v -t 2 "$c" >/dev/null 2>&1 || true; done
	if [ -n "$web_pid" ]; then kill "$web_pid" 2>/dev/null || true; fi
	if [ -f "$work/compose.env" ]; then
		podman-compose -p toolsvc-ct -f deploy/compose.yaml down -v >/dev/null 2>&1 || true
		podman network rm -f toolsvc-ct_default >/dev/null 2>&1 || true
		rm -f "$root/deploy/.env"
		if [ -f "$work/env.saved" ]; then mv "$work/env.saved" "$root/deploy/.env"; fi
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# The page to capture, served from here to the container through the
# bridge's gateway (a private address: allowed by TOOLSVC_NET_ALLOW_CIDRS).
gateway=$(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}}{{end}}')
[ -n "$gateway" ] || fail "no gateway on podman's default network"
mkdir -p "$work/site"
cat >"$work/site/index.html" <<'EOF'
<!doctype html><html><head><title>container test page</title></head>
<body style="background:#2a6"><h1>served by container-test.sh</h1></body></html>
EOF
web_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
# All interfaces: the bridge and its gateway address appear only once a
# container runs on it.
python3 -m http.server "$web_port" --bind 0.0.0.0 --directory "$work/site" >"$work/web.log" 2>&1 &
web_pid=$!
page=http://$gateway:$web_port/
for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$web_port/" && break || sleep 0.1; done
curl -fs -o /dev/null "http://127.0.0.1:$web_port/" || fail "the test page did not come up at $page"

key=container-test-key-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# call PORT TOOL JSON: the tool's Result object.
call() {
	curl -fsS --max-time 120 "http://127.0.0.1:$1/tools/$2/invoke" -H "Authorization: Bearer $key" -d "$3"
}
# field JSON NAME: one top-level string field of a JSON object.
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$1" "$2"; }

# wait_healthy CONTAINER PORT: the image's HEALTHCHECK passes and
# /healthz answers through the published port.
wait_healthy() {
	local i
	for i in $(seq 60); do
		if podman healthcheck run "$1" >/dev/null 2>&1; then
			curl -fsS "http://127.0.0.1:$2/healthz" | grep -q '"status":"ok"' || fail "$1: /healthz through the port: not ok"
			curl -fsS "http://127.0.0.1:$2/healthz" | grep -qF "\"version\":\"$version\"" ||
				fail "$1: /healthz does not report the version $version the image was built with"
			return
		fi
		sleep 0.5
	done
	podman logs "$1" 2>&1 | tail -30 >&2
	fail "$1: the HEALTHCHECK (toolsvc health) did not pass in 30 s"
}

# check NAME PORT: the checks every way of running the image must pass.
check() {
	local c=$1 port=$2 res out user magic code
	wait_healthy "$c" "$port"
	log "$c: healthy (HEALTHCHECK and /healthz)"

	out=$(podman logs "$c" 2>&1)
	[[ "$out" == *'"tool":"exec","state":"on","reason":"sandbox landlock'* ]] ||
		{
			grep '"tool"' <<<"$out" >&2
			fail "$c: exec is not on with the Landlock sandbox"
		}
	[ "$(podman exec "$c" id -u)" != 0 ] || fail "$c: runs as root"
	user=$(podman top "$c" user comm | awk '$2=="toolsvc"{print $1}')
	[ "$user" = toolsvc ] || fail "$c: the toolsvc process runs as '$user', not the image's toolsvc user"

	res=$(call "$port" write_file '{"path":"hello.txt","content":"hello from the container test\n"}')
	[ "$(field "$res" status)" = success ] || fail "$c: write_file: $res"
	res=$(call "$port" read_file '{"path":"hello.txt"}')
	[[ "$(field "$res" result)" == *"hello from the container test"* ]] || fail "$c: read_file: $res"
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/tools")
	[ "$code" = 401 ] || fail "$c: GET /tools without the key answered $code, not 401"
	log "$c: write_file, read_file and the key check passed"

	res=$(call "$port" screenshot '{"type":"web","url":"'"$page"'","viewport_width":640,"viewport_height":400,"output_path":"shots/page.png"}')
	[ "$(field "$res" status)" = success ] || fail "$c: screenshot: $res"
	magic=$(podman exec "$c" od -An -tx1 -N8 /workspace/shots/page.png | tr -d ' \n')
	[ "$magic" = 89504e470d0a1a0a ] || fail "$c: shots/page.png is not a PNG ($magic)"
	grep -q 'GET / ' "$work/web.log" || fail "$c: the test page was never requested"
	log "$c: web screenshot of $page is a PNG"
	# RLIMIT_NPROC counts every thread of the user: with no control
	# group here, the service's and Chromium's count against exec's limit.
	log "$c: $(podman exec "$c" sh -c 'cat /proc/[0-9]*/status 2>/dev/null | grep -c "^Threads:"') processes, $(podman exec "$c" sh -c 'cat /proc/[0-9]*/task/*/status 2>/dev/null | grep -c "^Uid:.*10001"') threads as uid 10001 with the browser up"
	# exec: runs, as the service's user, in the workspace; cannot read
	# the data folder (audit log) or write outside the workspace; no network.
	local cmd="id -u; cat hello.txt; git --version; python3 -c 'print(6*7)'; ls /data 2>&1; touch /etc/x 2>&1; touch /usr/local/bin/x 2>&1; python3 -c 'import socket; socket.create_connection((\"$gateway\", $web_port), 2)' 2>&1 | tail -1; true"
	res=$(call "$port" exec "$(python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1]}))' "$cmd")")
	out=$(field "$res" result)
	[ "$(field "$res" status)" = success ] || fail "$c: exec: $res"
	for want in 10001 "hello from the container test" "git version" 42 "ls: cannot open directory '/data': Permission denied" "touch: cannot touch '/etc/x'" "touch: cannot touch '/usr/local/bin/x'" "PermissionError"; do
		[[ "$out" == *"$want"* ]] || fail "$c: exec output lacks '$want': $out"
	done
	log "$c: exec under Landlock: ran as 10001; /data unreadable, /etc and /usr read-only, no network"
	check_signals "$c" "$port"
}

# check_signals CONTAINER PORT: a script the model writes finds a victim
# of the service's own user and the service itself in /proc, kills the
# one and signals the other (SIGUSR2 ends a service without a handler for
# it), sends SIGKILL to every process it may (kill -9 -1), and leaves
# processes behind with an empty environment in a session of their own.
# The victim and the service must live on, and nothing of the call be left
# when it returns. All of it stays inside the container's PID namespace.
check_signals() {
	local c=$1 port=$2 res out script
	podman exec -d --user 10001 "$c" sleep 600.77 >/dev/null || fail "$c: could not start the victim"
	script='for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case "$(cat "$d/comm" 2>/dev/null)" in
  toolsvc) kill -USR2 "$p" 2>/dev/null && echo "SIGNALLED-SERVICE $p" ;;
  sleep) case "$(tr "\0" " " <"$d/cmdline" 2>/dev/null)" in "sleep 600.77 ") kill -9 "$p" 2>/dev/null && echo "KILLED-VICTIM $p" ;; esac ;;
  esac
done
kill -9 -1
env -i setsid sh -c "sleep 600.78 & sleep 600.79" </dev/null >/dev/null 2>&1 &
(env -i sh -c "sleep 600.80 &" </dev/null >/dev/null 2>&1 &)
sleep 0.3
echo survived
'
	res=$(call "$port" write_file "$(python3 -c 'import json,sys; print(json.dumps({"path": "signals.sh", "content": sys.argv[1]}))' "$script")")
	[ "$(field "$res" status)" = success ] || fail "$c: write_file signals.sh: $res"
	res=$(call "$port" exec '{"command":"exec sh signals.sh"}')
	out=$(field "$res" result)
	[[ "$out" == *survived* ]] || fail "$c: the signal script did not run to its end: $res"
	[[ "$out" != *SIGNALLED-SERVICE* && "$out" != *KILLED-VICTIM* ]] || fail "$c: a command signalled outside its call: $out"
	sleep 0.2
	curl -fsS "http://127.0.0.1:$port/healthz" | grep -q '"status":"ok"' || fail "$c: the service is gone after the signal script"
	out=$(podman exec "$c" sh -c 'for d in /proc/[0-9]*; do tr "\0" " " <"$d/cmdline" 2>/dev/null; echo; done')
	grep -q '^sleep 600.77 ' <<<"$out" || fail "$c: the victim outside the call was killed"
	! grep -q '^sleep 600.\(78\|79\|80\) ' <<<"$out" || fail "$c: processes outlived the call: $(grep '^sleep 600' <<<"$out")"
	podman exec "$c" sh -c 'for d in /proc/[0-9]*; do case "$(tr "\0" " " <"$d/cmdline" 2>/dev/null)" in "sleep 600.77 ") kill "${d#/proc/}";; esac; done'
	log "$c: a command's kill -9 -1, its signals to the service and to a victim stay in its call, and its detached processes end with it"
}

# check_tools CONTAINER: what the image is for still works after what
# deploy/Dockerfile cuts, run directly in the container rather than through
# exec's sandbox, and what it cuts is gone.
check_tools() {
	local c=$1 out
	out=$(podman exec "$c" bwrap --version) || fail "$c: bwrap --version: $out"
	out=$(podman exec "$c" tini --version) || fail "$c: tini --version: $out"
	# The standard library, with its compiled modules and the CA bundle.
	out=$(podman exec "$c" python3 -c 'import json, ssl, sqlite3, hashlib, zlib, email, urllib.request, xml.etree.ElementTree as ET; print(json.dumps([ET.fromstring("<a>7</a>").text, hashlib.sha256(b"").hexdigest()[:8], ssl.create_default_context().cert_store_stats()["x509_ca"] > 100]))' 2>&1)
	[ "$out" = '["7", "e3b0c442", true]' ] || fail "$c: python3's standard library or CA bundle: $out"
	# git's everyday commands on a local repository, as the service's user.
	out=$(podman exec -w /tmp "$c" sh -ec '
		export HOME=/tmp/git-home GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
		rm -rf /tmp/git-home /tmp/g /tmp/g2 && mkdir /tmp/git-home
		git init -q /tmp/g && cd /tmp/g && echo one >f && git add f && git commit -qm first
		echo two >>f && git status --short && git diff | grep "^+two" && git commit -qam second
		git log --format=%s | tr "\n" " " && git clone -q /tmp/g /tmp/g2 && git -C /tmp/g2 log -1 --format=cloned:%s' 2>&1) ||
		fail "$c: git: $out"
	[[ "$out" == *" M f"*"+two"*"second first"*"cloned:second"* ]] || fail "$c: git's output: $out"
	# Chromium straight from its command line, in a locale whose
	# translation the image does not carry: it falls back to en-US.
	out=$(podman exec -w /tmp "$c" sh -c '
		printf "<h1 style=\"font-family:DejaVu Sans\">ok</h1>" >/tmp/p.html
		LANG=de_DE.UTF-8 HOME=/tmp timeout 90 chromium --headless --no-sandbox --disable-gpu --window-size=320,200 --screenshot=/tmp/p.png file:///tmp/p.html >/tmp/chromium.log 2>&1
		if [ -s /tmp/p.png ]; then od -An -tx1 -N8 /tmp/p.png | tr -d " \n"; else tail -5 /tmp/chromium.log; fi' 2>&1)
	[ "$out" = 89504e470d0a1a0a ] || fail "$c: chromium --headless --screenshot in de_DE: $out"
	# Gone: the Go toolchain, apt's lists, docs but copyright notices,
	# manual pages, translations (Chromium's too but en-US).
	out=$(podman exec "$c" sh -c 'command -v go; ls -d /usr/local/go /go /root/go 2>/dev/null; find /var/lib/apt/lists /usr/share/man /usr/share/locale /usr/share/doc ! -type d ! -name copyright; ls /usr/lib/chromium/locales' 2>&1)
	[ "$out" = en-US.pak ] || fail "$c: the image has what deploy/Dockerfile keeps out: $out"
	log "$c: bwrap, tini, python3, git and chromium (de_DE, en-US only) work; no Go, docs or translations"
}

# The image as compose runs it: read-only, no capabilities, no new
# privileges, the default seccomp profile, and the ulimits compose.yaml
# sets (podman's own defaults would not start here: see containers.conf
# above).
hardening=(--read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges
	--ulimit nofile=16384:16384 --ulimit nproc=4096:4096)
# run_image NAME PORT [OPTION...]: runs $img (default: the image) so.
run_image() {
	local name=$1 port=$2
	shift 2
	podman run -d --name "$name" "${hardening[@]}" "$@" -p "127.0.0.1:$port:8080" \
		-e TOOLSVC_API_KEYS="$key" -e TOOLSVC_NET_ALLOW_CIDRS="$gateway/32" "${img:-$image}" >/dev/null
	containers+=("$name")
}
# exec_json COMMAND: exec's arguments for COMMAND, with a minute to run.
exec_json() { python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1], "timeout": 60}))' "$1"; }

port=$(free_port)
run_image toolsvc-ct-podman "$port"
check toolsvc-ct-podman "$port"
check_tools toolsvc-ct-podman
# One at a time: the same uid in each shares one RLIMIT_NPROC count.
podman rm -f -v -t 2 toolsvc-ct-podman >/dev/null

# Docker's default seccomp profile (moby's, from the Go module proxy):
# it refuses unshare without CAP_SYS_ADMIN, where podman's allows it.
moby_dir=$(cd "$work" && GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json github.com/moby/profiles/seccomp@v0.3.0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
port=$(free_port)
run_image toolsvc-ct-docker-seccomp "$port" --security-opt "seccomp=$moby_dir/default.json"
check toolsvc-ct-docker-seccomp "$port"
podman rm -f -v -t 2 toolsvc-ct-docker-seccomp >/dev/null

# The tools file's folder, mounted at /etc/toolsvc as compose.yaml does:
# root's, mode 0755, the file 0644, as docs/deploy.md says. Its tool runs
# node. The checks that need the npm registry (an MCP server npx fetches,
# npm through the network allowlist) run only where this machine reaches
# it. Two things of this machine's network are handed on where they are
# so, and logged: its resolver answers for the registry with an address
# the network guard refuses (a gateway in 203.0.113.0/24 here), which
# TOOLSVC_NET_ALLOW_HOSTS opens for the proxy of every run that reaches the
# registry through the service (the allowlist's and compose's); and that gateway
# re-signs TLS with a CA of its own, which this machine's CA bundle holds
# and the image's does not, so node gets the bundle as NODE_EXTRA_CA_CERTS
# (from the tools folder, which commands may read under Landlock).
tools_dir=$work/toolsvc.d
mkdir -m 0755 "$tools_dir"
registry=registry.npmjs.org
npm_net=
net_env=(-e "TOOLSVC_EXEC_NET_ALLOW=$registry")
mcp_env=
allow_hosts=
if curl -fsS --max-time 15 -o /dev/null "https://$registry/-/ping"; then
	npm_net=1
	if ! python3 -c 'import ipaddress,socket,sys; sys.exit(not all(ipaddress.ip_address(a[4][0]).is_global for a in socket.getaddrinfo(sys.argv[1], 443)))' "$registry"; then
		log "$registry resolves to a non-public address here: TOOLSVC_NET_ALLOW_HOSTS=$registry for the allowlist and compose"
		allow_hosts=$registry
		net_env+=(-e "TOOLSVC_NET_ALLOW_HOSTS=$allow_hosts")
	fi
	if ! podman run --rm --entrypoint python3 "$image" -c 'import urllib.request; urllib.request.urlopen("https://'"$registry"'/-/ping", timeout=15)' >/dev/null 2>&1; then
		log "the image's CA bundle does not verify $registry from here: node gets this machine's bundle (NODE_EXTRA_CA_CERTS)"
		install -m 0644 /etc/ssl/certs/ca-certificates.crt "$tools_dir/ca.crt"
		net_env+=(-e TOOLSVC_EXEC_ENV_ALLOW=NODE_EXTRA_CA_CERTS -e NODE_EXTRA_CA_CERTS=/etc/toolsvc/ca.crt)
		mcp_env=', NODE_EXTRA_CA_CERTS: /etc/toolsvc/ca.crt'
	fi
else
	log "SKIP: $registry is not reachable from here: no MCP server from npm, no npm through the allowlist"
fi
{
	cat <<'EOF'
tools:
  - name: node_version
    description: The version of Node.js in the image.
    parameters: {type: object, additionalProperties: false}
    command: [node, --version]
EOF
	# The entry as server-memory's README gives it, pinned as
	# docs/custom-tools.md pins it, with the file its README's env names
	# put in the workspace, and no "network": a package runner's entry
	# then gets its registry alone (npm's, from npm's configuration),
	# through the service's proxy.
	if [ -n "$npm_net" ]; then
		cat <<EOF
mcpServers:
  memory:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-memory@2026.8.31"]
    env: {MEMORY_FILE_PATH: "\${WORKSPACE}/memory.jsonl"$mcp_env}
EOF
	fi
} >"$tools_dir/tools.yaml"
chmod 0644 "$tools_dir/tools.yaml"

# check_memory CONTAINER PORT: the tools file's MCP server, which npx
# fetches from the registry as it starts, comes up with the registry as
# its only network, and answers: an entity it makes is read back. The log
# decides the network: every line that names the server's network (its
# starting and up lines) says only the registry, and no refusal names the
# registry (refusals of other hosts are shown, not failed: a package may
# ask for more than it needs). Logs the server's start: the seconds from
# its starting line to its up line, and any attempt that failed before.
check_memory() {
	local c=$1 port=$2 res out i summary
	for i in $(seq 180); do
		out=$(podman logs "$c" 2>&1)
		[[ "$out" == *'"mcp_server":"memory","state":"up"'* ]] && break
		sleep 1
	done
	[[ "$out" == *'"mcp_server":"memory","state":"up"'* ]] ||
		{
			grep '"mcp_server"' <<<"$out" | tail -20 >&2
			fail "$c: the MCP server npx starts was not up in 180 s"
		}
	podman logs "$c" >"$work/$c.log" 2>&1
	summary=$(python3 - "$registry:443" "$work/$c.log" <<'EOF'
import datetime, json, sys
want = "only " + sys.argv[1]
host = sys.argv[1].rsplit(":", 1)[0]
start = up = None
bad, failed, other = [], [], []
for line in open(sys.argv[2]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("mcp_server") != "memory":
        continue
    t = datetime.datetime.fromisoformat(m["time"]) if "time" in m else None
    if "network" in m and m["network"] != want:
        bad.append(line.strip())
    if "refused" in m:
        (bad if ("refused: " + host + ":") in m["refused"] else other).append(m["refused"])
    if m.get("state") == "starting" and start is None:
        start = t
    if m.get("state") == "up" and up is None:
        up = t
        up_line = {k: m[k] for k in ("mcp_server", "state", "at", "network") if k in m}
    if m.get("message", "").startswith(("mcp server: start failed", "mcp server: connection ended")) and up is None:
        failed.append(m.get("error", m["message"]))
if bad:
    print("the server's network is not its registry alone:\n" + "\n".join(bad))
    sys.exit(1)
took = f"{(up - start).total_seconds():.0f} s" if start and up else "?"
print(f"up {took} after its start, {json.dumps(up_line, separators=(',', ':'))}; "
      f"{len(failed)} failed attempt(s) before{': ' + '; '.join(failed) if failed else ''}; "
      f"refusals of other hosts: {', '.join(sorted(set(other))) or 'none'}")
EOF
	) || fail "$c: $summary"
	[[ "$out" != *"cannot be its only network here"* ]] || fail "$c: the MCP server got no network instead of its registry: $(grep -m1 'cannot be its only network here' <<<"$out")"
	res=$(call "$port" memory__create_entities '{"entities":[{"name":"container-test","entityType":"test","observations":["made in '"$c"'"]}]}')
	[ "$(field "$res" status)" = success ] || fail "$c: memory__create_entities: $res"
	res=$(call "$port" memory__read_graph '{}')
	[[ "$(field "$res" result)" == *"made in $c"* ]] || fail "$c: memory__read_graph: $res"
	podman exec "$c" test -s /workspace/memory.jsonl || fail "$c: server-memory kept no /workspace/memory.jsonl"
	log "$c: the MCP server npx fetched (no \"network\" in its entry) was $summary; memory__create_entities and memory__read_graph answered"
}

# The guard on the tools file: a host user's folder and file (uid 1000)
# show with that uid in the container, and the service refuses them.
mkdir -m 0755 "$work/foreign"
cp "$tools_dir/tools.yaml" "$work/foreign/"
chown -R 1000:1000 "$work/foreign"
# (Named, so that the clean-up ends it should it start after all.)
containers+=(toolsvc-ct-guard toolsvc-ct-docker-allowlist)
out=$(timeout 60 podman run --rm --name toolsvc-ct-guard "${hardening[@]}" -v "$work/foreign:/etc/toolsvc:ro" -e TOOLSVC_API_KEYS="$key" \
	-e TOOLSVC_TOOLS_FILE=/etc/toolsvc/tools.yaml "$image" 2>&1) && fail "the service started with a tools file of uid 1000's"
[[ "$out" == *"belongs to uid 1000, neither the service's user (uid 10001) nor root"* ]] ||
	fail "a tools file of uid 1000's was not refused for its owner: $(tail -3 <<<"$out")"
log "a tools folder and file of uid 1000's are refused: $(grep -o 'the [a-z]* /etc/toolsvc[^ ]* belongs to uid 1000' <<<"$out" | head -1)"

# The network allowlist (TOOLSVC_EXEC_NET_ALLOW) in the container, as
# docs/deploy.md, "Network allowlists in containers", says: the service
# cannot make a network namespace itself (no CAP_SYS_ADMIN), so each
# command's first program makes a user and a network namespace of its own.
# podman's default seccomp profile lets it; Docker's refuses it and the
# service does not start; Docker's with one rule added (clone with
# CLONE_NEWUSER|CLONE_NEWNET and no other namespace) lets it again.
#
# npx through the proxy, with the registry as the only network: a
# command's npx fetches server-memory and its 99 packages and the server
# answers an MCP initialize, and the tools file's entry for it (no
# "network", so the registry alone) starts and answers (check_memory).
# Debian's npm 9 opens a tunnel per request, all at once, whatever
# npm_config_maxsockets says (its proxy agent, agent-base 6, keeps no pool
# and ignores it): 86 at once were counted here, under the proxy's 512.
#
# check_allowlist CONTAINER PORT: npm reaches the registry through the
# service's proxy; another registry and a direct connection are refused;
# npx starts server-memory, from a command and from the tools file.
check_allowlist() {
	local c=$1 port=$2 res out
	wait_healthy "$c" "$port"
	out=$(podman logs "$c" 2>&1)
	[[ "$out" == *"network only through the service's proxy"* ]] ||
		fail "$c: exec's start-up line does not name the allowlist: $(grep 'exec sandbox' <<<"$out")"
	res=$(call "$port" exec "$(exec_json "npm view @modelcontextprotocol/server-memory@2026.8.31 bin.mcp-server-memory; npm view --registry https://registry.yarnpkg.com/ @modelcontextprotocol/server-memory version 2>&1 | grep -m1 E403; python3 -c 'import socket; socket.create_connection((\"$gateway\", $web_port), 2)' 2>&1 | tail -1; true")")
	out=$(field "$res" result)
	for want in dist/index.js 'refused: registry.yarnpkg.com:443 (no allow rule matches)'; do
		[[ "$out" == *"$want"* ]] || fail "$c: npm through the allowlist: the output lacks '$want': $out"
	done
	[[ "$out" == *PermissionError* || "$out" == *"Network is unreachable"* ]] || fail "$c: a direct connection was not refused: $out"
	log "$c: npm reached $registry through the allowlist; another registry and a direct connection were refused"
	# A fresh HOME, so npx downloads it all; the server answers the
	# initialize on its stdin and ends with it.
	res=$(call "$port" exec "$(exec_json "printf '%s\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"container-test\",\"version\":\"1\"}}}' | npx -y @modelcontextprotocol/server-memory@2026.8.31 2>&1 | grep -v EBADENGINE")")
	out=$(field "$res" result)
	[[ "$(field "$res" status)" == success && "$out" == *'"serverInfo":{"name":"memory-server"'* ]] ||
		fail "$c: npx of server-memory through the allowlist: $res"
	log "$c: npx fetched server-memory through the allowlist and it answered initialize in $(field "$res" duration_ms) ms"
	check_memory "$c" "$port"
}
if [ -n "$npm_net" ]; then
	# podman's default profile: user namespaces are allowed, as the
	# service's user (unshare's own commands, as docs/deploy.md quotes them).
	port=$(free_port)
	img=$node_image run_image toolsvc-ct-allowlist "$port" -v "$tools_dir:/etc/toolsvc:ro" -e TOOLSVC_TOOLS_FILE=/etc/toolsvc/tools.yaml "${net_env[@]}"
	out=$(podman exec toolsvc-ct-allowlist sh -c 'unshare -Urn true && echo userns-ok; unshare -n true 2>&1; true' 2>&1)
	[[ "$out" == "userns-ok"*"unshare failed: Operation not permitted"* ]] || fail "toolsvc-ct-allowlist: unshare -Urn / -n: $out"
	check_allowlist toolsvc-ct-allowlist "$port"
	podman rm -f -v -t 2 toolsvc-ct-allowlist >/dev/null

	# Docker's default profile: no user namespace, and the service says so
	# and stops.
	out=$(timeout 60 podman run --rm "${hardening[@]}" --security-opt "seccomp=$moby_dir/default.json" --entrypoint unshare "$node_image" -Urn true 2>&1) &&
		fail "unshare -Urn succeeded under Docker's default profile"
	out=$(timeout 60 podman run --rm --name toolsvc-ct-docker-allowlist "${hardening[@]}" --security-opt "seccomp=$moby_dir/default.json" -e TOOLSVC_API_KEYS="$key" "${net_env[@]}" "$node_image" 2>&1) &&
		fail "the service started with TOOLSVC_EXEC_NET_ALLOW under Docker's default profile"
	out=$(grep '^toolsvc: TOOLSVC_EXEC_NET_ALLOW' <<<"$out") || fail "under Docker's profile the service did not say why the allowlist cannot work"
	log "Docker's profile: unshare -Urn refused; the service stops: ${out:0:160}..."

	# Docker's default profile and the rule docs/deploy.md gives.
	python3 - "$moby_dir/default.json" "$work/seccomp-netns.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["syscalls"].append({"names": ["clone"], "action": "SCMP_ACT_ALLOW",
    "args": [{"index": 0, "value": 2114060288, "valueTwo": 1342177280, "op": "SCMP_CMP_MASKED_EQ"}],
    "excludes": {"arches": ["s390", "s390x"]}})
json.dump(p, open(sys.argv[2], "w"))
EOF
	port=$(free_port)
	img=$node_image run_image toolsvc-ct-allowlist-docker "$port" --security-opt "seccomp=$work/seccomp-netns.json" -v "$tools_dir:/etc/toolsvc:ro" -e TOOLSVC_TOOLS_FILE=/etc/toolsvc/tools.yaml "${net_env[@]}"
	check_allowlist toolsvc-ct-allowlist-docker "$port"
	podman rm -f -v -t 2 toolsvc-ct-allowlist-docker >/dev/null
fi

# check_node CONTAINER PORT: the Node variant through compose: the tools
# file in the read-only folder is loaded (its command tool, which runs
# node, and the MCP server npx fetches and starts), and node, npx and npm's
# cache work through exec, as the service's user on the read-only root.
check_node() {
	local c=$1 port=$2 res out want nv
	out=$(podman logs "$c" 2>&1)
	[[ "$out" == *'"tool":"node_version","state":"on","source":"file"'* ]] ||
		{
			grep '"tool"\|tools file' <<<"$out" >&2
			fail "$c: the start-up log does not list the tools file's node_version"
		}
	res=$(call "$port" node_version '{}')
	nv=$(field "$res" result)
	[[ "$nv" =~ ^v[0-9]+\. ]] || fail "$c: node_version: $res"
	res=$(call "$port" exec "$(exec_json 'node --version; npx --version; npm config get cache; npm config get update-notifier; npm cache verify 2>&1 | head -1; touch /usr/share/nodejs/x 2>&1; true')")
	out=$(field "$res" result)
	[ "$(field "$res" status)" = success ] || fail "$c: exec of node and npx: $res"
	[[ "$out" =~ ^v[0-9]+\.[0-9.]+$'\n'[0-9]+\.[0-9.]+$'\n' ]] || fail "$c: node --version and npx --version: $out"
	for want in /tmp/home/.npm false 'Cache verified' "touch: cannot touch '/usr/share/nodejs/x'"; do
		[[ "$out" == *"$want"* ]] || fail "$c: exec's npm output lacks '$want': $out"
	done
	log "$c: the tools file's node_version ran node ${nv%%[[:space:]]*}; node, npx and npm's cache (in TOOLSVC_EXEC_HOME) work through exec"
	[ -n "$npm_net" ] || return 0
	check_memory "$c" "$port"
}

# Compose, with the README's commands as written: the sh block of its "Run
# it in a container" section, read from README.md so that the two cannot
# drift apart, run in order in one shell. Two things are the test's own:
# between the lines that make deploy/.env and scripts/compose-up.sh it adds
# to that file another port (the block's URLs get the same port), the Node
# variant, the tools folder above and a HOME kept between exec's calls; and
# the environment names the engine (podman-compose), the project
# (toolsvc-ct, whose network is made here first, with a known gateway for
# the test page) and a containers.conf that sets only the runtime, so that
# compose.yaml's own ulimits are what lets the container start.
port=$(free_port)
compose_gw=10.89.213.1
podman network rm -f toolsvc-ct_default >/dev/null 2>&1 || true
podman network create --subnet 10.89.213.0/24 --gateway "$compose_gw" toolsvc-ct_default >/dev/null
# An operator's own deploy/.env is put back afterwards.
if [ -f deploy/.env ]; then cp -p deploy/.env "$work/env.saved"; fi
touch "$work/compose.env"
# section_block FILE HEADING prints the first sh block under the section
# "## HEADING" of the Markdown file FILE: the commands a page shows, to be
# run as written.
section_block() {
	python3 - "$1" "$2" <<'EOF'
import re, sys
path, heading = sys.argv[1], sys.argv[2]
_, found, rest = open(path).read().partition("\n## " + heading + "\n")
m = re.search(r"^```sh\n(.*?)^```", rest.split("\n## ", 1)[0], re.S | re.M)
if not found or not m:
    sys.exit(f"{path} has no sh block under '## {heading}'")
print(m.group(1), end="")
EOF
}
readme_block=$(section_block README.md "Run it in a container") || fail "README.md: no container commands to run"
up_at=$(grep -n '^scripts/compose-up\.sh\b' <<<"$readme_block" | cut -d: -f1 | head -1)
[ -n "$up_at" ] || fail "README.md's container commands do not run scripts/compose-up.sh: $readme_block"
up_cmd=$(sed -n "${up_at}p" <<<"$readme_block")
up_show=$(sed 's/[[:space:]]*#.*//' <<<"$up_cmd")
# The MCP server's registry is opened for its proxy where it resolves to
# an address the network guard refuses (see the tools folder above).
{
	head -n $((up_at - 1)) <<<"$readme_block"
	echo "sed -i 's/^HOST_PORT=.*/HOST_PORT=$port/' deploy/.env"
	echo "cat >>deploy/.env <<'EOF'"
	echo "TOOLSVC_NET_ALLOW_CIDRS=$compose_gw/32"
	echo "IMAGE_TARGET=node"
	echo "TOOLS_DIR=$tools_dir"
	echo "TOOLSVC_TOOLS_FILE=/etc/toolsvc/tools.yaml"
	echo "TOOLSVC_EXEC_HOME=/tmp/home"
	if [ -n "$allow_hosts" ]; then echo "TOOLSVC_NET_ALLOW_HOSTS=$allow_hosts"; fi
	echo "EOF"
	tail -n +"$up_at" <<<"$readme_block" | sed "s/localhost:8080/localhost:$port/g"
} >"$work/readme-compose.sh"
page=http://$compose_gw:$web_port/
compose_env=(COMPOSE=podman-compose COMPOSE_PROJECT_NAME=toolsvc-ct CONTAINERS_CONF=$compose_conf BUILD_VERSION=$version)
log "the README's container commands, with $up_show (the Node variant, port $port)"
env "${compose_env[@]}" bash -e "$work/readme-compose.sh" >"$work/compose.log" 2>&1 ||
	{
		tail -40 "$work/compose.log" >&2
		fail "the README's container commands failed (above); they were: $(cat "$work/readme-compose.sh")"
	}
grep -q '^\[{"type":"function"' "$work/compose.log" ||
	{
		tail -20 "$work/compose.log" >&2
		fail "the README's curl of /tools did not list tools"
	}
log "$(grep '^compose-up: .* is healthy' "$work/compose.log")"
# The key the README's commands made.
key=$(sed -n 's/^TOOLSVC_API_KEYS=//p' deploy/.env)
c=$(podman ps -a --filter label=io.podman.compose.project=toolsvc-ct --format '{{.Names}}' | head -1)
[ -n "$c" ] || fail "no container of the project toolsvc-ct after the README's commands"
ro=$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}}' "$c")
[[ "$ro" == true* && "$ro" == *no-new-privileges* ]] || fail "$c: compose did not apply read_only/no-new-privileges: $ro"
[[ "$(podman inspect --format '{{.ImageName}}' "$c")" == *toolsvc:node ]] || fail "$c: compose did not run toolsvc:node for IMAGE_TARGET=node"
limits=$(podman exec "$c" sh -c 'grep -E "^Max (open files|processes)" /proc/1/limits' | awk '{print $(NF-2)"/"$(NF-1)}' | tr '\n' ' ')
[ "$limits" = "4096/4096 16384/16384 " ] || fail "$c: nproc and nofile are not compose.yaml's: $limits"
check "$c" "$port"
# Static: no program interpreter (ld-linux) named in the binary's headers.
[ "$(podman exec "$c" python3 -c 'print(b"ld-linux" in open("/usr/local/bin/toolsvc", "rb").read(4096))')" = False ] ||
	fail "$c: /usr/local/bin/toolsvc is dynamically linked"
[ "$(podman exec "$c" cat /proc/1/comm)" = tini ] || fail "$c: PID 1 is not tini"
[ "$(podman exec "$c" sh -c 'grep -l ^tini /proc/[0-9]*/comm | wc -l')" = 1 ] || fail "$c: more than one tini"
check_node "$c" "$port"

# docs/deploy.md's compose commands are the README's and more: they must
# begin with the README's block as it is (run above), and what they add is
# run here, as written, against the same service.
deploy_block=$(section_block docs/deploy.md "Run with docker compose") || fail "docs/deploy.md: no compose commands to run"
[[ "$deploy_block" == "$readme_block"* ]] ||
	fail "docs/deploy.md's compose commands do not begin with the README's; make them so (they were: $deploy_block)"
{
	echo "KEY=$key"
	sed "s/localhost:8080/localhost:$port/g" <<<"${deploy_block#"$readme_block"}"
} >"$work/deploy-compose.sh"
bash -e "$work/deploy-compose.sh" >"$work/deploy-compose.log" 2>&1 ||
	fail "docs/deploy.md's compose commands failed: $(tail -20 "$work/deploy-compose.log")"
grep -q '"status":"success"' "$work/deploy-compose.log" && grep -q 'git version' "$work/deploy-compose.log" &&
	grep -q 'Python 3' "$work/deploy-compose.log" ||
	fail "docs/deploy.md's exec of git and python3 did not answer both: $(cat "$work/deploy-compose.log")"
log "docs/deploy.md's compose commands: $(grep -o 'git version [0-9.]*' "$work/deploy-compose.log"), $(grep -o 'Python 3[0-9.]*' "$work/deploy-compose.log")"

# The same command when the service cannot start (a setting it refuses):
# it must exit non-zero and show the service's own message.
echo 'TOOLSVC_EXEC_TIMEOUT=ten' >>deploy/.env
rc=0
env "${compose_env[@]}" bash -c "$up_cmd" >"$work/compose-fail.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "$up_show exited 0 with TOOLSVC_EXEC_TIMEOUT=ten: $(tail -5 "$work/compose-fail.log")"
why=$(grep -m1 '^toolsvc: .*TOOLSVC_EXEC_TIMEOUT' "$work/compose-fail.log") ||
	fail "$up_show failed (exit $rc) without the service's message: $(tail -10 "$work/compose-fail.log")"
log "with TOOLSVC_EXEC_TIMEOUT=ten, $up_show exited $rc: $why / $(grep -m1 '^compose-up: FAIL' "$work/compose-fail.log")"

log "PASS in $(($(date +%s) - start)) s"
