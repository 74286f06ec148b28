#!/usr/bin/env bash
# Shows toolsvc's traces in a real viewer, Jaeger v2, and checks them there.
#
#   scripts/trace-viewer.sh            # build, start, call, print the trace, stop
#   KEEP=1 scripts/trace-viewer.sh     # the same, then leave both running until Ctrl-C
#
# It builds Jaeger (once, into a cache folder: about 11 CPU-minutes) from the Go
# module proxy, starts it with in-memory storage on free loopback ports,
# builds toolsvc and starts it with TOOLSVC_OTEL_ENDPOINT pointing at
# Jaeger (in a temporary workspace and data folder), makes three calls with
# a traceparent (read_file, exec, and a read_file that fails), fetches the
# trace from Jaeger's query API, prints its span tree and checks that the
# spans toolsvc should have sent are there. It exits non-zero if one is
# missing. It stops what it started.
#
# Needs go, curl, openssl and python3. Jaeger goes in
# $TOOLSVC_JAEGER_DIR (default ~/.cache/toolsvc/jaeger-VERSION); a jaeger
# binary there is used as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

jaeger_version=v1.75.0
jaeger_dir=${TOOLSVC_JAEGER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolsvc/jaeger-$jaeger_version}
jaeger=$jaeger_dir/jaeger

# --- Jaeger: built once. `go install ...@version` refuses it (its go.mod has
# replace directives), so it is built as a tool of a scratch module.
if [[ ! -x $jaeger ]]; then
  echo "building Jaeger $jaeger_version into $jaeger_dir (once; about 11 CPU-minutes)"
  mkdir -p "$jaeger_dir/build"
  (
    cd "$jaeger_dir/build"
    export GOWORK=off GOFLAGS=
    [[ -f go.mod ]] || go mod init jaeger-build 2>/dev/null
    { go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$jaeger_version" &&
      go build -o "$jaeger" github.com/jaegertracing/jaeger/cmd/jaeger; } > build.log 2>&1 ||
      { tail -n 20 build.log; echo "FAILED: building Jaeger (all of it in $PWD/build.log)"; exit 1; }
  )
fi

tmp=$(mktemp -d)
pids=()
stop() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 130' INT TERM # so that Ctrl-C ends the wait of KEEP=1, and stop runs
fail() {
  echo "FAILED: $*" >&2
  for log in "$tmp"/*.log; do
    echo "--- last lines of $(basename "$log")" >&2
    tail -n 20 "$log" >&2
  done
  exit 1
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_for URL WHAT: until URL answers 200, at most 60 s.
wait_for() {
  for _ in $(seq 600); do
    curl -fso /dev/null "$1" && return
    sleep 0.1
  done
  fail "$2 did not answer at $1"
}

# --- Start Jaeger: the all-in-one's pieces (OTLP receiver, in-memory
# store, query API and UI) on free loopback ports, so that it runs beside
# another Jaeger on the default ports 4318 and 16686.
otlp_port=$(free_port) query_port=$(free_port) query_grpc_port=$(free_port)
cat > "$tmp/jaeger.yaml" <<EOF
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics: {level: none}
extensions:
  jaeger_storage:
    backends:
      memstore: {memory: {max_traces: 10000}}
  jaeger_query:
    storage: {traces: memstore}
    enable_tracing: false # else Jaeger sends its own spans to localhost:4317
    http: {endpoint: "127.0.0.1:$query_port"}
    grpc: {endpoint: "127.0.0.1:$query_grpc_port"}
receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:$otlp_port"}
processors:
  batch:
exporters:
  jaeger_storage_exporter: {trace_storage: memstore}
EOF
"$jaeger" --config "$tmp/jaeger.yaml" > "$tmp/jaeger.log" 2>&1 &
pids+=($!)
query=http://127.0.0.1:$query_port
wait_for "$query/api/services" "Jaeger's query API"
echo "Jaeger $jaeger_version: OTLP/HTTP on 127.0.0.1:$otlp_port, UI and query API on $query"

# --- Start toolsvc, exporting to Jaeger. The exporter sends its batch
# every 200 ms instead of every 5 s, so that the spans arrive soon.
go build -o "$tmp/toolsvc" ./cmd/toolsvc
mkdir -p "$tmp/workspace" "$tmp/data"
printf -- '- buy milk\n- call Alice\n' > "$tmp/workspace/notes.txt"
toolsvc_addr=127.0.0.1:$(free_port)
# TOOLSVC_JAEGER_DIR is this script's, not a setting: toolsvc refuses a
# TOOLSVC_* name it does not know.
env -u TOOLSVC_JAEGER_DIR TOOLSVC_ADDR=$toolsvc_addr TOOLSVC_WORKSPACE=$tmp/workspace TOOLSVC_DATA_DIR=$tmp/data \
  TOOLSVC_OTEL_ENDPOINT=http://127.0.0.1:$otlp_port OTEL_BSP_SCHEDULE_DELAY=200 \
  "$tmp/toolsvc" > "$tmp/toolsvc.log" 2>&1 &
pids+=($!)
wait_for "http://$toolsvc_addr/healthz" toolsvc
echo "toolsvc on $toolsvc_addr, TOOLSVC_OTEL_ENDPOINT=http://127.0.0.1:$otlp_port"

# --- Three calls in one trace, each as a client span of its own would send
# them: the trace ID is shared, the parent span ID is new each time.
trace_id=$(openssl rand -hex 16)
call() { # call TOOL ARGUMENTS
  curl -fsS "http://$toolsvc_addr/tools/$1/invoke" -d "$2" \
    -H "traceparent: 00-$trace_id-$(openssl rand -hex 8)-01"
}
echo
echo "calls with traceparent 00-$trace_id-...-01:"
call read_file '{"path": "notes.txt"}'
call exec '{"command": "grep -c Alice notes.txt"}'
call read_file '{"path": "missing.txt"}'

# --- Fetch the trace from Jaeger until the 7 spans are there (at most 30 s).
want_spans=7
for _ in $(seq 150); do
  curl -fsS "$query/api/traces/$trace_id" > "$tmp/trace.json" 2>/dev/null &&
    [[ $(python3 -c 'import json, sys; print(sum(len(t["spans"]) for t in json.load(sys.stdin)["data"]))' < "$tmp/trace.json") -ge $want_spans ]] &&
    break
  sleep 0.2
done
[[ -s $tmp/trace.json ]] || fail "Jaeger has no trace $trace_id"

echo
echo "GET $query/api/traces/$trace_id"
# Print the tree (name, kind, duration, the attributes worth reading) and
# check it: each expected span, with its attributes and its parent.
python3 - "$tmp/trace.json" <<'EOF' || fail "the trace in Jaeger is not what toolsvc sent"
import json, sys

shown = ["url.path", "http.response.status_code", "gen_ai.tool.name", "error.type",
         "toolsvc.error.code", "toolsvc.sandbox.mode", "process.exit.code"]
trace = json.load(open(sys.argv[1]))["data"][0]
spans = trace["spans"]
byid = {s["spanID"]: s for s in spans}
tags = {s["spanID"]: {t["key"]: t["value"] for t in s["tags"]} for s in spans}
parent = {}
for s in spans:
    refs = [r["spanID"] for r in s.get("references", []) if r["refType"] == "CHILD_OF"]
    parent[s["spanID"]] = refs[0] if refs else None
children = {}
for s in sorted(spans, key=lambda s: s["startTime"]):
    children.setdefault(parent[s["spanID"]] if parent[s["spanID"]] in byid else "root", []).append(s)

services = sorted({p["serviceName"] for p in trace["processes"].values()})
print(f"trace {trace['traceID']}: {len(spans)} spans, service {', '.join(services)}")
def show(s, depth):
    t = tags[s["spanID"]]
    attrs = " ".join(f"{k}={t[k]}" for k in shown if k in t)
    status = " ERROR" if t.get("otel.status_code") == "ERROR" else ""
    print(f"{'  ' * depth}{s['operationName']} [{t.get('span.kind', '?')}] {s['duration'] / 1000:.2f} ms{status}  {attrs}".rstrip())
    for c in children.get(s["spanID"], []):
        show(c, depth + 1)
for s in children.get("root", []):
    show(s, 1)

# The checks: what toolsvc sends for these three calls.
problems = []
def find(name, parent_name, **want):
    for s in spans:
        t, p = tags[s["spanID"]], byid.get(parent[s["spanID"]])
        if s["operationName"] == name and (p or {}).get("operationName") == parent_name and \
                all(str(t.get(k)) == str(v) for k, v in want.items()):
            return
    problems.append(f"no span {name} under {parent_name} with {want}")
rest = "POST /tools/{name}/invoke"
for path in ["/tools/read_file/invoke", "/tools/exec/invoke"]:
    find(rest, None, **{"url.path": path, "http.response.status_code": 200})
find("execute_tool read_file", rest, **{"gen_ai.tool.name": "read_file"})
find("execute_tool read_file", rest, **{"error.type": "tool_error", "toolsvc.error.code": "not_found"})
find("execute_tool exec", rest, **{"gen_ai.tool.name": "exec"})
find("exec", "execute_tool exec", **{"process.exit.code": 0})
if len(spans) != 7:
    problems.append(f"{len(spans)} spans, want 7")
for p in problems:
    print("missing:", p)
print("OK: every expected span is in Jaeger" if not problems else f"{len(problems)} problems")
sys.exit(1 if problems else 0)
EOF

# A Jaeger built from the module proxy has no UI (a placeholder page says
# so); the container image jaegertracing/jaeger has it.
if curl -fsS "$query/" | grep -q "not the Jaeger UI"; then
  echo "the trace: $query/api/traces/$trace_id (this Jaeger build's UI is a placeholder)"
else
  echo "the trace: $query/trace/$trace_id (UI), $query/api/traces/$trace_id (JSON)"
fi
if [[ -n ${KEEP:-} ]]; then
  echo "KEEP is set: Jaeger and toolsvc keep running; Ctrl-C stops them"
  wait
fi
