#!/usr/bin/python3
"""A stdio MCP server on Python's standard library alone: one tool, now,
the current time in a time zone. docs/custom-tools.md shows it installed
under /opt and mounted by toolsvc; the end-to-end test
TestMCPPythonServer (cmd/toolsvc/mcp_playwright_e2e_test.go) runs it so.

MCP over stdio is JSON-RPC 2.0, one message a line: the client's requests
come on stdin, the answers go to stdout, which carries nothing else
(diagnostics go to stderr, which toolsvc writes to its log).
"""

import datetime
import json
import sys
import zoneinfo

TOOLS = [
    {
        "name": "now",
        "description": "The current date and time in a time zone, as ISO 8601. "
        "Use it when the user asks what time it is somewhere.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "timezone": {
                    "type": "string",
                    "description": "An IANA time zone such as Europe/Lisbon; default UTC.",
                }
            },
            "additionalProperties": False,
        },
    }
]


def call(name, args):
    """Runs a tool: its text, and whether it is an error the model sees."""
    if name != "now":
        return f"no tool {name}", True
    tz = args.get("timezone") or "UTC"
    try:
        zone = zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {tz!r}: give an IANA name such as Europe/Lisbon", True
    return f"{tz}: {datetime.datetime.now(zone).isoformat(timespec='seconds')}", False


def answer(msg):
    """The answer to one request, or None for a notification."""
    method, params = msg.get("method"), msg.get("params") or {}
    if "id" not in msg:
        return None
    if method == "initialize":
        result = {
            # The client's version is echoed: this server uses nothing
            # that differs between them.
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "clock", "version": "1.0.0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text, is_error = call(params.get("name"), params.get("arguments") or {})
        result = {"content": [{"type": "text", "text": text}], "isError": is_error}
    else:
        return {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": msg["id"], "result": result}


def main():
    print("clock: serving MCP on stdio", file=sys.stderr, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as e:
            print(f"clock: not JSON: {e}", file=sys.stderr, flush=True)
            continue
        out = answer(msg)
        if out is not None:
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
