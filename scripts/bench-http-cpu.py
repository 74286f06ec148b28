#!/usr/bin/env python3
"""Server CPU time per call of an HTTP endpoint, driven the way
bench-mcp-cpu.py drives the MCP server: one Python client, one call at a
time on a kept-alive connection, CPU read from /proc/PID/stat around the
loop. Puts toolsvc and the bare handler on the MCP server's footing.
usage: bench-http-cpu.py NAME HOST PORT PATH BODY PID [N]"""
import http.client, os, sys, time
name, host, port, path, body, pid = sys.argv[1:7]
n = int(sys.argv[7]) if len(sys.argv) > 7 else 2000
conn = http.client.HTTPConnection(host, int(port))
def call():
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"{name}: HTTP {r.status}")
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
for _ in range(200):
    call()
c0, t0 = cpu(), time.perf_counter()
for _ in range(n):
    call()
c1, t1 = cpu(), time.perf_counter()
print(f"{name}: {n/(t1-t0):.0f} calls/s (Python client), {(c1-c0)/n*1e6:.0f} us server CPU/call")
