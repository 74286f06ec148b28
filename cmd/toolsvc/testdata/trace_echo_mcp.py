"""A stdio MCP server for TestTracesAcrossServices, standard library only.

Its one tool, trace, answers with the trace context the call's _meta
carried (traceparent, tracestate), as the MCP semantic conventions put
it there: a server that traces would continue that trace. Messages are
JSON-RPC, one per line, as MCP's stdio transport sends them.
"""

import json
import sys

TOOL = {
    "name": "trace",
    "description": "Answers with the traceparent and tracestate of the call's _meta.",
    "inputSchema": {"type": "object", "properties": {}},
}


def answer(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "trace-echo", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        meta = params.get("_meta") or {}
        got = {"traceparent": meta.get("traceparent"), "tracestate": meta.get("tracestate")}
        return {"content": [{"type": "text", "text": json.dumps(got)}]}
    if method == "ping":
        return {}
    return None


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if "id" not in msg:
            continue  # a notification
        result = answer(msg)
        if result is None:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no such method"}}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
