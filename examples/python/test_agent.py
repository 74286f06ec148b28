"""Tests of agent.py, standard library only: python3 -m unittest examples/python/test_agent.py

Each test puts loopback HTTP servers where toolsvc and the model API would
be and checks what the agent sends, how often, and what it makes of the
answers. cmd/toolsvc/python_agent_e2e_test.go runs this file, and runs
the agent against the real service.
"""

import http.server
import io
import json
import os
import socket
import sys
import threading
import unittest
from contextlib import redirect_stderr
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent  # noqa: E402


class Server:
    """A loopback HTTP server whose answers come from handle(method, path,
    body) -> (status, headers, body); it counts the requests it got."""

    def __init__(self, handle):
        self.handle = handle
        self.requests = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                with outer.lock:
                    outer.requests.append((self.command, self.path, body))
                status, headers, data = outer.handle(self.command, self.path, body)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up

            do_GET = do_POST = do_any

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def js(obj, status=200, headers=None):
    return status, dict({"Content-Type": "application/json"}, **(headers or {})), json.dumps(obj).encode()


def ok_result(text):
    return js({"call_id": "c", "tool": "t", "status": "success", "result": text, "duration_ms": 1})


class AgentTest(unittest.TestCase):
    def setUp(self):
        self.sleeps = []
        patches = [
            mock.patch.object(agent.time, "sleep", self.sleeps.append),
            mock.patch.object(agent, "RETRIES", 3),
            mock.patch.object(agent, "MAX_WAIT", 30),
            mock.patch.object(agent, "TIMEOUT", 30),
        ]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)
        self.stderr = io.StringIO()
        r = redirect_stderr(self.stderr)
        r.__enter__()
        self.addCleanup(r.__exit__, None, None, None)

    def serve(self, handle):
        s = Server(handle)
        self.addCleanup(s.close)
        return s

    def use_tools(self, server):
        p = mock.patch.object(agent, "TOOLS_URL", server.url)
        p.start()
        self.addCleanup(p.stop)

    def test_503_with_retry_after_is_retried(self):
        answers = [js({"error": {"code": "overloaded", "message": "busy"}}, 503, {"Retry-After": "2"}), ok_result("done")]
        s = self.serve(lambda *a: answers.pop(0))
        self.use_tools(s)
        self.assertEqual(agent.invoke("exec", '{"command":"true"}', ["exec"]), "done")
        self.assertEqual(len(s.requests), 2)
        self.assertEqual(self.sleeps, [2])

    def test_bad_retry_after_is_a_message(self):
        answers = [js({"error": {"message": "busy"}}, 503, {"Retry-After": "soon"}), ok_result("done")]
        s = self.serve(lambda *a: answers.pop(0))
        self.use_tools(s)
        self.assertEqual(agent.invoke("exec", "{}", ["exec"]), "done")
        self.assertIn("its Retry-After 'soon' is neither seconds nor a date", self.stderr.getvalue())
        self.assertNotIn("Traceback", self.stderr.getvalue())
        self.assertEqual(len(self.sleeps), 1)

    def test_retry_after_forms(self):
        self.assertEqual(agent.parse_retry_after("7"), 7)
        self.assertIsNone(agent.parse_retry_after("soon"))
        self.assertIsNone(agent.parse_retry_after(""))
        self.assertIsNone(agent.parse_retry_after("-1"))
        self.assertEqual(agent.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), 0)

    def test_5xx_without_retry_after_is_not_retried(self):
        for status, headers in ((503, {}), (500, {"Retry-After": "1"}), (502, {})):
            s = self.serve(lambda *a, st=status, h=headers: js({"error": {"message": "down"}}, st, h))
            self.use_tools(s)
            out = agent.invoke("exec", "{}", ["exec"])
            self.assertTrue(out.startswith("Error:"), out)
            self.assertEqual(len(s.requests), 1, (status, headers))
        self.assertEqual(self.sleeps, [])

    def test_connection_refused_is_retried(self):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()  # nothing listens there now
        with mock.patch.object(agent, "TOOLS_URL", f"http://127.0.0.1:{port}"):
            out = agent.invoke("exec", "{}", ["exec"])
        self.assertIn("could not be reached", out)
        self.assertEqual(len(self.sleeps), 2)  # three attempts

    def test_timeout_is_not_retried(self):
        release = threading.Event()
        self.addCleanup(release.set)

        def slow(*a):
            release.wait(60)
            return ok_result("late")

        s = self.serve(slow)
        self.use_tools(s)
        with mock.patch.object(agent, "TIMEOUT", 0.5):
            out = agent.invoke("exec", '{"command":"sleep 5"}', ["exec"])
        self.assertIn("may still be running", out)
        self.assertIn("Next:", out)
        self.assertEqual(len(s.requests), 1)
        self.assertEqual(self.sleeps, [])

    def model(self, replies):
        """A model API that answers with replies in turn (the last repeats)
        and a tool service that answers every call with "ran"."""
        m = self.serve(lambda *a: js({"choices": [{"index": 0, "message": replies[min(len(m.requests), len(replies)) - 1], "finish_reason": "stop"}]}))
        tools = self.serve(lambda method, path, body: js([{"type": "function", "function": {"name": "read_file", "parameters": {}}}]) if method == "GET" else ok_result("ran"))
        for name, value in (("LLM_BASE_URL", m.url + "/v1"), ("TOOLS_URL", tools.url)):
            p = mock.patch.object(agent, name, value)
            p.start()
            self.addCleanup(p.stop)
        return m, tools

    def test_null_message_ends_the_run_with_a_message(self):
        self.model([None])
        with self.assertRaises(SystemExit) as e:
            agent.run("go")
        self.assertIn("no choices[0].message object", str(e.exception.code))

    def test_calls_that_are_not_objects_become_results(self):
        replies = [
            {"role": "assistant", "content": None, "tool_calls": [
                "read_file",
                {"id": "c1", "type": "function", "function": "read_file"},
                {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": [1, 2]}},
                {"id": "c3", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a"}},
                 "extra_content": {"google": {"thought_signature": "sig"}}},
            ], "reasoning_content": ""},
            {"role": "assistant", "content": "All done."},
        ]
        m, tools = self.model(replies)
        out = io.StringIO()
        with mock.patch.object(sys, "stdout", out):
            self.assertEqual(agent.run("go"), 0)
        self.assertEqual(out.getvalue().strip(), "All done.")
        self.assertNotIn("Traceback", self.stderr.getvalue())
        second = json.loads(m.requests[1][2])["messages"]
        asst = second[2]
        self.assertEqual(asst["content"], "")
        self.assertEqual(asst["reasoning_content"], "")
        self.assertEqual([c["id"] for c in asst["tool_calls"]], ["c1", "c2", "c3"])
        self.assertEqual(asst["tool_calls"][2]["extra_content"], {"google": {"thought_signature": "sig"}})
        results = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
        self.assertIn("names no function", results["c1"])
        self.assertIn("must be a JSON object", results["c2"])
        self.assertEqual(results["c3"], "ran")
        invoked = [r for r in tools.requests if r[0] == "POST"]
        self.assertEqual([r[2] for r in invoked], [b'{"path": "a"}'])

    def test_only_bad_calls_asks_again(self):
        m, _ = self.model([{"role": "assistant", "content": None, "tool_calls": [42]}, {"role": "assistant", "content": "ok"}])
        out = io.StringIO()
        with mock.patch.object(sys, "stdout", out):
            self.assertEqual(agent.run("go"), 0)
        second = json.loads(m.requests[1][2])["messages"]
        self.assertEqual(second[-1]["role"], "user")
        self.assertIn("were not JSON objects", second[-1]["content"])
        self.assertTrue(second[-2]["content"])  # never an empty assistant message


if __name__ == "__main__":
    unittest.main()
