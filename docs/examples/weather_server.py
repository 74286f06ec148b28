#!/usr/bin/env python3
"""A stand-in for the weather service of tools.yaml's weather tool.

It listens on 127.0.0.1:8091 (or the port given as its argument) and
answers a POST to /v1/current with the weather of the city in the JSON
body. So that you can see what toolsvc sends, the answer also says which
headers the request carried, the token included, as a careless service
might: toolsvc removes the token from the result. Standard library only:

    python3 docs/examples/weather_server.py &
"""

import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Weather(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/current":
            return self.answer(404, {"error": "no such path: " + self.path})
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self.answer(401, {"error": "no bearer token"})
        try:
            args = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        except ValueError as e:
            return self.answer(400, {"error": "the body is not JSON: %s" % e})
        units = args.get("units", "metric")
        self.answer(200, {
            "city": args.get("city"),
            "temperature": 21 if units == "metric" else 70,
            "units": units,
            "conditions": "sunny",
            "request": {
                "content_type": self.headers.get("Content-Type"),
                "authorization": self.headers.get("Authorization"),
                "x_call_id": self.headers.get("X-Call-ID"),
            },
        })

    def answer(self, status, body):
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        sys.stderr.write("weather: %s\n" % (fmt % args))


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8091
    # Ctrl-C stops it even where its parent made it ignore SIGINT, as a
    # shell does for a command started with &.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ThreadingHTTPServer(("127.0.0.1", port), Weather).serve_forever()
    except KeyboardInterrupt:
        pass
