#!/usr/bin/env python3
"""Server CPU time per read_file call of toolsvc through MCP (tools/call,
one JSON-RPC request per HTTP request) against REST, one call at a time
from one Python client on a kept-alive connection, the two doors taking
turns (5 rounds) so that both see the same load; CPU from /proc/PID/stat.
The goal: MCP/REST <= 1.2.
usage: bench-mcp-rest-cpu.py PORT PID [N]   (small.txt in the workspace)"""
import http.client, json, os, sys
port, pid = int(sys.argv[1]), sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
conn = http.client.HTTPConnection("127.0.0.1", port)
def call(path, body, hdr):
    conn.request("POST", path, body=body, headers=hdr)
    r = conn.getresponse(); d = r.read()
    if r.status != 200 or b"success" not in d: sys.exit(f"{path}: {r.status} {d[:200]}")
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
rest = ("/tools/read_file/invoke", '{"path":"small.txt"}', {"Content-Type": "application/json"})
mcp = ("/mcp", json.dumps({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"small.txt"}}}),
       {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"})
for c in (rest, mcp):
    for _ in range(200): call(*c)
tot = {"rest": 0.0, "mcp": 0.0}
for _ in range(5):  # in turns, so both see the same load
    for name, c in (("rest", rest), ("mcp", mcp)):
        c0 = cpu()
        for _ in range(n // 5): call(*c)
        tot[name] += cpu() - c0
print(f"server CPU per call: REST {tot['rest']/n*1e6:.0f} us, MCP {tot['mcp']/n*1e6:.0f} us, MCP/REST {tot['mcp']/tot['rest']:.2f}")
