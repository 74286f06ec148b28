#!/usr/bin/env python3
"""Server CPU time per read_text_file call of the reference MCP filesystem
server, read from /proc/PID/stat around a loop of calls (the client's own
speed does not matter for this figure).
usage: bench-mcp-cpu.py SERVER_JS ROOT [N]"""
import json, os, subprocess, sys, time
js, root = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
p = subprocess.Popen(["node", js, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
nid = 0
def call(method, params):
    global nid
    nid += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": nid, "method": method, "params": params}) + "\n")
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == nid:
            return m
def cpu():
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}})
p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"); p.stdin.flush()
with open(os.path.join(root, "small.txt"), "w") as f:
    f.write("hello\n" * 10)
for _ in range(200):  # warm up the JIT
    call("tools/call", {"name": "read_text_file", "arguments": {"path": os.path.join(root, "small.txt")}})
c0, t0 = cpu(), time.perf_counter()
for _ in range(n):
    call("tools/call", {"name": "read_text_file", "arguments": {"path": os.path.join(root, "small.txt")}})
c1, t1 = cpu(), time.perf_counter()
print(f"mcp read_text_file: {n/(t1-t0):.0f} calls/s (Python client), {(c1-c0)/n*1e6:.0f} us server CPU/call")
p.kill()
