#!/usr/bin/env bash
# container-test.sh builds deploy/Dockerfile with podman and checks the
# image on a real engine: health (HEALTHCHECK and GET /healthz through the
# published port), a tool call, a web screenshot of a page this script
# serves, exec under the sandbox docs/deploy.md promises (Landlock, under
# Docker's own default seccomp profile as well as podman's), that the
# service runs as a user other than root, and the same through
# deploy/compose.yaml with podman-compose.
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
# crun fails on this machine's cgroup setup and the default nproc/nofile
# ulimits are refused: a containers.conf of our own, not the system's.
cat >"$cache/containers.conf" <<'EOF'
[containers]
default_ulimits = []

[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF=$cache/containers.conf
mirror=${TOOLSVC_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
image=localhost/toolsvc:container-test
# The version the image reports: the checkout's, as git describes it.
version=$(git describe --always --dirty 2>/dev/null || echo devel)

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
	# The image's size is held: deploy/Dockerfile keeps out what the service
	# never reads (docs, translations, apt's lists and caches, the GPU
	# drivers). 900 MB, decimal.
	size=$(podman image inspect --format '{{.Size}}' "$image")
	log "built a $((size / 1000000)) MB image"
	if [ "$size" -gt 900000000 ]; then
		podman history --format '{{.Size}}\t{{.CreatedBy}}' "$image" | cut -c1-160 >&2
		fail "the image is $((size / 1000000)) MB, over 900 MB: see its layers above"
	fi
}

if [ "$mode" != check ]; then
	build_image
	[ "$mode" = build ] && exit 0
elif ! podman image exists "$image"; then
	fail "no image $image to check: run scripts/container-test.sh build first"
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
# privileges, default seccomp profile.
hardening=(--read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges)
run_image() {
	local name=$1 port=$2
	shift 2
	podman run -d --name "$name" "${hardening[@]}" "$@" -p "127.0.0.1:$port:8080" \
		-e TOOLSVC_API_KEYS="$key" -e TOOLSVC_NET_ALLOW_CIDRS="$gateway/32" "$image" >/dev/null
	containers+=("$name")
}

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

# Compose, as the README and docs/deploy.md say, with a .env made from the example. Its
# network is made here first, with a known gateway for the test page.
port=$(free_port)
compose_gw=10.89.213.1
podman network rm -f toolsvc-ct_default >/dev/null 2>&1 || true
podman network create --subnet 10.89.213.0/24 --gateway "$compose_gw" toolsvc-ct_default >/dev/null
# An operator's own deploy/.env is put back afterwards.
if [ -f deploy/.env ]; then cp -p deploy/.env "$work/env.saved"; fi
touch "$work/compose.env"
sed -e "s/^TOOLSVC_API_KEYS=.*/TOOLSVC_API_KEYS=$key/" -e "s/^HOST_PORT=.*/HOST_PORT=$port/" deploy/.env.example >deploy/.env
echo "TOOLSVC_NET_ALLOW_CIDRS=$compose_gw/32" >>deploy/.env
page=http://$compose_gw:$web_port/
log "podman-compose up"
# The image compose.yaml names, from the build above (podman-compose would
# build it again, in the OCI format, which has no HEALTHCHECK).
podman tag "$image" localhost/toolsvc:latest
podman-compose -p toolsvc-ct -f deploy/compose.yaml up -d --no-build >"$work/compose.log" 2>&1 ||
	{
		cat "$work/compose.log" >&2
		fail "podman-compose up failed"
	}
c=$(podman ps --filter label=io.podman.compose.project=toolsvc-ct --format '{{.Names}}' | head -1)
[ -n "$c" ] || fail "compose started no container"
ro=$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}}' "$c")
[[ "$ro" == true* && "$ro" == *no-new-privileges* ]] || fail "$c: compose did not apply read_only/no-new-privileges: $ro"
check "$c" "$port"
# Static: no program interpreter (ld-linux) named in the binary's headers.
[ "$(podman exec "$c" python3 -c 'print(b"ld-linux" in open("/usr/local/bin/toolsvc", "rb").read(4096))')" = False ] ||
	fail "$c: /usr/local/bin/toolsvc is dynamically linked"
[ "$(podman exec "$c" cat /proc/1/comm)" = tini ] || fail "$c: PID 1 is not tini"
[ "$(podman exec "$c" sh -c 'grep -l ^tini /proc/[0-9]*/comm | wc -l')" = 1 ] || fail "$c: more than one tini"

log "PASS in $(($(date +%s) - start)) s"
