# Sourced by bench-http.sh and bench-http-instr.sh: builds the servers they
# compare into $W (toolsvc, barehttp, and with BASE=<git revision> toolsvc
# of that revision as toolsvc-base) and writes the file they read,
# $W/ws/small.txt (ten lines of "hello").
mkdir -p "$W/ws"
go build -o "$W/toolsvc" ./cmd/toolsvc
go build -o "$W/barehttp" ./scripts/barehttp
if [ -n "${BASE:-}" ]; then
  mkdir "$W/base"
  git archive "$BASE" | tar -x -C "$W/base"
  (cd "$W/base" && go build -o "$W/toolsvc-base" ./cmd/toolsvc)
fi
printf 'hello\n%.0s' {1..10} > "$W/ws/small.txt"
