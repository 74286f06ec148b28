"""A Python backend's calls to toolsvc in a trace of its own, for
TestTracesAcrossServices: standard library only, as an agent loop
instrumented with OpenTelemetry would send them.

Usage: trace_client.py BASE_URL TASK

It makes a trace ID and, for each call, a span ID of its own (the span of
its tool call), and sends them as W3C traceparent: in the header of
POST /tools/spawn/invoke, and in the _meta of a tools/call over /mcp (the
MCP semantic conventions' place). It prints one JSON object: the trace
ID, each call's span ID and each answer.
"""

import json
import secrets
import sys
import urllib.request


def post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.status, json.loads(resp.read())


def main():
    base, task = sys.argv[1], sys.argv[2]
    trace_id = secrets.token_hex(16)
    rest_span, mcp_span = secrets.token_hex(8), secrets.token_hex(8)

    status, rest = post(base + "/tools/spawn/invoke", {"task": task, "wait": True},
                        {"traceparent": f"00-{trace_id}-{rest_span}-01", "X-Session-ID": "py-trace"})
    if status != 200:
        sys.exit(f"REST answered {status}")

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo__trace", "arguments": {},
                       "_meta": {"traceparent": f"00-{trace_id}-{mcp_span}-01", "tracestate": "py=1"}}}
    status, mcp = post(base + "/mcp", call, {"Accept": "application/json, text/event-stream"})
    if status != 200:
        sys.exit(f"MCP answered {status}")

    print(json.dumps({"trace_id": trace_id, "rest_span": rest_span, "mcp_span": mcp_span,
                      "rest": rest, "mcp": mcp}))


if __name__ == "__main__":
    main()
