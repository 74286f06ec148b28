#!/usr/bin/env python3
"""A complete agent loop over toolsvc, standard library only.

It fetches the tool definitions from GET /tools, hands them to any
OpenAI-compatible chat completions API (OpenAI, Ollama, llama.cpp, vLLM,
LM Studio...), runs every tool call the model makes with
POST /tools/<name>/invoke and gives the results back, until the model
answers without a tool call. The answer goes to standard output, progress
to standard error.

    LLM_BASE_URL=http://localhost:11434/v1 LLM_MODEL=qwen2.5:7b \\
        python3 examples/python/agent.py "Create hello.py that prints hello, then run it."

Settings (environment):
  TOOLS_URL        toolsvc's address (default http://127.0.0.1:8080)
  TOOLS_KEY        one of the service's TOOLSVC_API_KEYS, if it has keys
  LLM_BASE_URL     the model API's base URL, up to /v1 (default https://api.openai.com/v1)
  LLM_API_KEY      the model API's key; leave unset for keyless local servers
  LLM_MODEL        model name (default gpt-4o-mini)
  AGENT_MAX_TURNS  model replies before giving up (default 20)
  AGENT_SESSION    X-Session-ID for toolsvc's audit log (default agent-<pid>)
  AGENT_SYSTEM     system prompt (default: a short one naming the workspace)
  AGENT_RETRIES    attempts per request when it was refused unrun (default 4)
  AGENT_MAX_WAIT   longest wait in seconds a Retry-After may ask for (default 30)
  AGENT_TIMEOUT    seconds to wait for one answer (default 300; exec may take minutes)

A request is sent again only when it cannot have been acted on: the
connection was refused or the name did not resolve, so nothing was sent,
or the answer was 503 (or 429) with a Retry-After, the server's word that
it did not run the call. A request that got no answer in time is never
sent again: a tool call may still be running (an exec that ran twice is
worse than one reported as unfinished), so the model is told to check.

HTTP errors never crash the loop. A tool call's failure goes back to the
model as the tool's result, saying what happened and what to do next: an
unknown tool (404) names the tools there are; a busy service (503) is
retried after its Retry-After, then reported; a refused key (401)
is reported to the model and, once, to standard error for the operator.
So are replies the model gets wrong: a tool call that is not an object,
or whose arguments are not one.
Tool errors the model can fix (bad arguments, a failed command) are
already results with status "error" from toolsvc itself. Only failures of
the model API itself, after its retries, end the run (exit status 1).

Exit status: 0 the model answered, 1 the model API failed or the turns ran
out, 2 bad usage or settings.
"""

import datetime
import email.utils
import errno
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def env_int(name, default):
    value = os.environ.get(name, "")
    if value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        print(f"agent: {name}={value!r}: want a whole number of at least 1", file=sys.stderr)
        sys.exit(2)
    return n


TOOLS_URL = os.environ.get("TOOLS_URL", "http://127.0.0.1:8080").rstrip("/")
TOOLS_KEY = os.environ.get("TOOLS_KEY", "")
LLM_BASE_URL = os.environ.get("LLM_BASE_URL", "https://api.openai.com/v1").rstrip("/")
LLM_API_KEY = os.environ.get("LLM_API_KEY", "")
LLM_MODEL = os.environ.get("LLM_MODEL", "gpt-4o-mini")
MAX_TURNS = env_int("AGENT_MAX_TURNS", 20)
SESSION = os.environ.get("AGENT_SESSION", f"agent-{os.getpid()}")
RETRIES = env_int("AGENT_RETRIES", 4)
MAX_WAIT = env_int("AGENT_MAX_WAIT", 30)
SYSTEM = os.environ.get(
    "AGENT_SYSTEM",
    "You are a careful assistant with tools that work in a workspace folder. "
    "Use them to do the task, check your work, then answer briefly.",
)
TIMEOUT = env_int("AGENT_TIMEOUT", 300)  # seconds for one HTTP exchange


def say(msg):
    print(f"agent: {msg}", file=sys.stderr, flush=True)


class Reply:
    """One HTTP answer: status, headers and the body decoded when JSON."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def error_message(self):
        """The message of toolsvc's {"error": {"code", "message"}} body, or the body."""
        err = self.json.get("error") if isinstance(self.json, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        return self.body.decode("utf-8", "replace")[:500] or "(empty body)"


def request(method, url, body=None, headers=None):
    """Sends one request and returns a Reply, whatever its status; raises
    OSError (URLError included) when no answer arrived."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        with e:
            return Reply(e.code, e.headers, e.read())


def parse_retry_after(value):
    """Seconds a Retry-After value asks for (seconds or an HTTP date), or
    None when it is neither (e.g. "soon")."""
    value = (value or "").strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a zone-less one is read so
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - time.time())


def not_sent(err):
    """True when a request failed before anything was sent: the connection
    was refused, or the host name did not resolve (or the network was
    unreachable). Anything else (a timeout, a reset) may have reached the
    server after all."""
    reason = getattr(err, "reason", err)
    if isinstance(reason, (ConnectionRefusedError, socket.gaierror)):
        return True
    return isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH)


def refused_unrun(reply):
    """True for an answer that says the request was not acted on and may be
    sent again: 503 or 429 with a Retry-After, except a 429 about a spent
    quota, which waiting does not fix."""
    if reply.status not in (429, 503) or "Retry-After" not in reply.headers:
        return False
    return not (reply.status == 429 and "quota" in reply.error_message().lower())


def with_retries(what, send):
    """Calls send() again only when the request cannot have been acted on
    (not_sent, refused_unrun), waiting as the server asks. Returns the last
    Reply, or raises the last OSError."""
    for attempt in range(RETRIES):
        last = attempt == RETRIES - 1
        try:
            reply = send()
        except OSError as e:
            if last or not not_sent(e):
                raise
            wait = min(2**attempt, 8, MAX_WAIT)
            say(f"{what}: {e}; trying again in {wait:.0f}s")
            time.sleep(wait)
            continue
        if last or not refused_unrun(reply):
            return reply
        value = reply.headers.get("Retry-After", "")
        wait = parse_retry_after(value)
        note = ""
        if wait is None:
            wait = min(2**attempt, 8)
            note = f" (its Retry-After {value!r} is neither seconds nor a date)"
        wait = min(wait, MAX_WAIT)
        say(f"{what}: HTTP {reply.status} ({reply.error_message()}){note}; trying again in {wait:.0f}s")
        time.sleep(wait)
    raise AssertionError("unreachable")


def timed_out(err):
    return isinstance(getattr(err, "reason", err), (TimeoutError, socket.timeout))


def tools_headers():
    h = {"Content-Type": "application/json", "X-Session-ID": SESSION}
    if TOOLS_KEY:
        h["Authorization"] = "Bearer " + TOOLS_KEY
    return h


def fetch_tools():
    """GET /tools: the OpenAI function definitions, ready for the model."""
    try:
        reply = with_retries("GET /tools", lambda: request("GET", TOOLS_URL + "/tools", headers=tools_headers()))
    except OSError as e:
        raise SystemExit(f"agent: toolsvc at {TOOLS_URL} could not be reached: {e}; start it, or set TOOLS_URL") from None
    if reply.status == 401:
        raise SystemExit(f"agent: toolsvc refused the key (401: {reply.error_message()}); set TOOLS_KEY to one of its TOOLSVC_API_KEYS")
    if reply.status != 200 or not isinstance(reply.json, list):
        raise SystemExit(f"agent: GET {TOOLS_URL}/tools answered HTTP {reply.status}: {reply.error_message()}")
    return reply.json


warned_401 = False


def invoke(name, arguments, names):
    """Runs one tool call and returns the text the model gets back. Never
    raises for an HTTP error: each becomes a result the model can act on."""
    global warned_401
    # The path segment is the model's tool name, quoted: a name with a
    # slash or "?" cannot reach another route.
    url = f"{TOOLS_URL}/tools/{urllib.parse.quote(name, safe='')}/invoke"
    # The arguments string goes through untouched: malformed JSON comes back
    # from toolsvc as a result telling the model to regenerate the call.
    body = arguments.encode() if isinstance(arguments, str) else json.dumps(arguments or {}).encode()
    try:
        reply = with_retries(f"tool {name}", lambda: request("POST", url, body, tools_headers()))
    except OSError as e:
        if timed_out(e):
            say(f"tool {name}: no answer within {TIMEOUT}s (AGENT_TIMEOUT); not sent again")
            return (f"Error: the tool service did not answer within {TIMEOUT}s; the call may still be running, or may have "
                    "finished. It was not sent again. Next: check its effect (e.g. list or read the files it would change) "
                    "before you call it again.")
        if not_sent(e):
            return f"Error: the tool service could not be reached ({e}). Next: try again later, or continue without this tool."
        return (f"Error: the connection to the tool service failed ({e}); the call may or may not have run. "
                "Next: check its effect before you call it again.")
    if reply.status == 200 and isinstance(reply.json, dict) and "result" in reply.json:
        return str(reply.json["result"])
    msg = reply.error_message()
    if reply.status == 404:
        return f"Error: there is no tool named '{name}' ({msg}). Next: call one of these tools instead: {', '.join(names)}."
    if reply.status == 401:
        if not warned_401:
            say(f"toolsvc refused the key (401: {msg}); set TOOLS_KEY to one of its TOOLSVC_API_KEYS")
            warned_401 = True
        return "Error: the tool service refused this agent's credentials (HTTP 401); the operator has to fix its key. Next: do not retry this call; answer with what you have."
    if reply.status in (429, 503):
        return f"Error: the tool service is busy (HTTP {reply.status}: {msg}). Next: try the call again later, or continue without it."
    if reply.status == 413:
        return f"Error: the arguments were too large for the tool service ({msg}). Next: send less at once, e.g. write the file in parts with mode append."
    return f"Error: the tool service answered HTTP {reply.status}: {msg}. Next: check the arguments, or continue without this tool."


def chat(messages, tools):
    """One chat completion: the assistant message, a dict. Retries as
    with_retries does; other failures end the run with a message."""
    headers = {"Content-Type": "application/json"}
    if LLM_API_KEY:
        headers["Authorization"] = "Bearer " + LLM_API_KEY
    body = {"model": LLM_MODEL, "messages": messages}
    if tools:
        body["tools"] = tools
    url = LLM_BASE_URL + "/chat/completions"
    try:
        reply = with_retries("model", lambda: request("POST", url, body, headers))
    except OSError as e:
        if timed_out(e):
            raise SystemExit(f"agent: the model API at {url} did not answer within {TIMEOUT}s (AGENT_TIMEOUT)") from None
        raise SystemExit(f"agent: the model API at {url} could not be reached: {e}") from None
    if reply.status != 200:
        raise SystemExit(f"agent: the model API answered HTTP {reply.status}: {reply.error_message()}")
    try:
        message = reply.json["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        message = None
    if not isinstance(message, dict):
        raise SystemExit(f"agent: the model API's answer has no choices[0].message object: {reply.body[:500]!r}")
    return message


def echo(reply, calls):
    """The assistant message to send back: the reply's own fields (providers
    want some back: DeepSeek's reasoning_content, OpenRouter's
    reasoning_details, Gemini's extra_content on each call), without the
    null ones, and with content "" beside tool calls, as Mistral accepts
    only one of the two."""
    msg = {k: v for k, v in reply.items() if v is not None and k not in ("annotations", "audio")}
    msg["role"] = "assistant"
    msg.pop("tool_calls", None)
    if calls:
        msg["content"] = ""
        msg["tool_calls"] = calls
    else:
        msg["content"] = reply.get("content") or ""
    return msg


def arguments_text(name, arguments):
    """The arguments as the JSON text toolsvc takes, or None (with a
    result for the model) when they are not a JSON object."""
    if arguments is None or arguments == "":
        return "{}", None
    if isinstance(arguments, str):
        # Passed through untouched: malformed JSON comes back from toolsvc
        # as a result telling the model to regenerate the call.
        return arguments, None
    if isinstance(arguments, dict):
        return json.dumps(arguments), None
    return None, (f"Error: the arguments of {name} must be a JSON object, not {type(arguments).__name__} "
                  f"{json.dumps(arguments)[:100]}. Next: call {name} again with its arguments as one JSON object.")


def split_calls(reply):
    """The reply's tool calls that can be answered (objects with an id, the
    function normalised), and how many could not (not objects)."""
    raw = reply.get("tool_calls") or []
    if not isinstance(raw, list):
        raw = [raw]
    calls, bad = [], 0
    for i, call in enumerate(raw):
        if not isinstance(call, dict):
            bad += 1
            continue
        call = dict(call)
        call.setdefault("id", f"call_{i}")
        call.setdefault("type", "function")
        if not isinstance(call.get("function"), dict):
            call["function"] = {"name": "", "arguments": call.get("function")}
        calls.append(call)
    return calls, bad


def answer(call, names):
    """Runs one call and returns its tool message."""
    fn = call["function"]
    name = fn.get("name")
    name = name if isinstance(name, str) else ""
    args, err = arguments_text(name or "the tool", fn.get("arguments"))
    if not name:
        err = ("Error: this tool call names no function. Next: call one of these tools, with "
               f"function.name and function.arguments: {', '.join(names)}.")
    if err is None:
        say(f"{name} {args[:200]}")
        result = invoke(name, args, names)
    else:
        say(f"{name or '(no name)'}: refused: {err}")
        result = err
    return {"role": "tool", "tool_call_id": call["id"], "content": result}


def run(task):
    tools = fetch_tools()
    names = sorted(n for n in (t["function"].get("name") for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict))
                   if isinstance(n, str))
    say(f"{len(names)} tools: {', '.join(names)}")
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for turn in range(MAX_TURNS):
        reply = chat(messages, tools)
        calls, bad = split_calls(reply)
        messages.append(echo(reply, calls))
        if bad:
            say(f"turn {turn + 1}: {bad} tool call(s) that are not objects were ignored")
        if not calls and not bad:
            content = reply.get("content")
            print(content if isinstance(content, str) else json.dumps(content) if content else "")
            return 0
        if not calls:
            if not messages[-1]["content"]:
                messages[-1]["content"] = "(tool calls that were not objects)"
            messages.append({"role": "user", "content": "Error: your tool calls were not JSON objects with an id and a "
                             "function, so none ran. Next: call the tools again, each as an object, or answer."})
            continue
        say(f"turn {turn + 1}: {len(calls)} tool call(s)")
        for call in calls:
            messages.append(answer(call, names))
    say(f"no answer after {MAX_TURNS} turns (AGENT_MAX_TURNS)")
    return 1


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    task = " ".join(argv[1:]).strip() or sys.stdin.read().strip()
    if not task:
        print("usage: agent.py TASK (or the task on standard input); -h for the settings", file=sys.stderr)
        return 2
    return run(task)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except KeyboardInterrupt:
        sys.exit(130)
