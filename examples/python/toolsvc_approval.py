"""toolsvc's approval hold for a Python agent, standard library only.

toolsvc decides which calls wait for a person (its policy file's and tools
file's approval rules, docs/approvals.md). A held call answers
status "approval_required" with an approval_id and has not run; once a key
of TOOLSVC_APPROVER_KEYS approves it, the same call, with the same
arguments, from the same key, runs once. This module is that protocol and
nothing else, so that any agent framework can put its own approval flow on
top of it (agents_sdk_approval.py does so for the OpenAI Agents SDK):

    tools = Client("http://127.0.0.1:8080", key=AGENT_KEY)
    desk = Approvals("http://127.0.0.1:8080", key=APPROVER_KEY)   # optional
    calls = HeldCalls(tools, desk)

    outcome = calls.first(call_id, "exec", '{"command": "git push"}')
    if outcome.held:                      # nothing ran: ask a person
        print(outcome.summary)
        result = calls.approve(call_id)   # or calls.reject(call_id, "why")
    else:
        result = outcome.result           # it ran already, once

A call is never sent twice by this module except the one resend that an
approval exists for: first() remembers each call's outcome by its ID, so a
framework that asks again gets the same answer, and a call that ran is not
run again.
"""

import json
import urllib.error
import urllib.parse
import urllib.request

APPROVAL_REQUIRED = "approval_required"


class ToolsvcError(Exception):
    """An HTTP error of toolsvc (not a tool's error, which is a result):
    status is the HTTP status, code and message come from its body."""

    def __init__(self, status, code, message):
        super().__init__(f"toolsvc answered {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


def _request(base, key, method, path, body=None, headers=None, timeout=300):
    req = urllib.request.Request(base.rstrip("/") + path, data=body, method=method)
    req.add_header("Accept", "application/json")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        data = e.read()
        try:
            err = json.loads(data)["error"]
            code, message = err.get("code", ""), err.get("message", "")
        except (ValueError, KeyError, TypeError):
            code, message = "", data.decode("utf-8", "replace")[:500]
        raise ToolsvcError(e.code, code, message) from None


def _body(arguments):
    """The call's body: the model's arguments string as it is (toolsvc
    hashes their canonical form, so the resend must carry the same
    values), or a dict encoded once."""
    if arguments is None or arguments == "":
        return b"{}"
    if isinstance(arguments, (bytes, bytearray)):
        return bytes(arguments)
    if isinstance(arguments, str):
        return arguments.encode("utf-8")
    return json.dumps(arguments).encode("utf-8")


class Client:
    """The agent's side: list tools and invoke them with the agent's key."""

    def __init__(self, url, key=None, session=None, timeout=300):
        self.url, self.key, self.session, self.timeout = url, key, session, timeout

    def definitions(self):
        """GET /tools: OpenAI function definitions, sorted by name."""
        return _request(self.url, self.key, "GET", "/tools", timeout=self.timeout)

    def invoke(self, name, arguments, approval_id=None):
        """POST /tools/{name}/invoke; the result object, whatever its
        status ("success", "error", "approval_required")."""
        headers = {}
        if self.session:
            headers["X-Session-ID"] = self.session
        if approval_id:
            headers["X-Approval"] = approval_id
        path = "/tools/" + urllib.parse.quote(name, safe="") + "/invoke"
        return _request(self.url, self.key, "POST", path, _body(arguments), headers, self.timeout)


class Approvals:
    """The person's side: an approver key (TOOLSVC_APPROVER_KEYS or an
    admin key). toolsvc refuses a key deciding its own call unless the
    policy gives it self_approve, so this is normally not the agent's key."""

    def __init__(self, url, key, timeout=30):
        self.url, self.key, self.timeout = url, key, timeout

    def pending(self):
        """GET /approvals: the calls waiting, oldest first."""
        return _request(self.url, self.key, "GET", "/approvals", timeout=self.timeout)["approvals"]

    def get(self, approval_id):
        return _request(self.url, self.key, "GET", "/approvals/" + urllib.parse.quote(approval_id, safe=""), timeout=self.timeout)

    def decide(self, approval_id, decision, reason=""):
        """POST /approvals/{id}: decision is "approve" or "reject"."""
        body = json.dumps({"decision": decision, "reason": reason}).encode("utf-8")
        return _request(self.url, self.key, "POST", "/approvals/" + urllib.parse.quote(approval_id, safe=""), body, timeout=self.timeout)


class Outcome:
    """What became of a call's first sending: held (nothing ran; the
    approval's ID, summary and expiry say what waits) or ran (result is
    the final result, success or error)."""

    def __init__(self, name, arguments, result):
        self.name, self.arguments, self.result = name, arguments, result

    @property
    def held(self):
        return self.result.get("status") == APPROVAL_REQUIRED

    @property
    def approval_id(self):
        return self.result.get("approval_id")

    @property
    def summary(self):
        return self.result.get("summary") or self.result.get("result", "")

    @property
    def expires_at(self):
        return self.result.get("expires_at")


class HeldCalls:
    """Each model tool call's way through toolsvc's hold, by the call's ID
    (the model's tool_call id)."""

    def __init__(self, client, approvals=None):
        self.client, self.approvals = client, approvals
        self._calls = {}

    def first(self, call_id, name, arguments):
        """Sends the call once and remembers what became of it; asked again
        for the same call ID, answers the same without sending it."""
        if call_id not in self._calls:
            self._calls[call_id] = Outcome(name, arguments, self.client.invoke(name, arguments))
        return self._calls[call_id]

    def outcome(self, call_id):
        return self._calls.get(call_id)

    def find(self, name, arguments):
        """The ID of a held call of name with these arguments (as sent),
        for a framework that hands back the call but not its ID."""
        for cid, o in self._calls.items():
            if o.held and o.name == name and o.arguments == arguments:
                return cid
        return None

    def approve(self, call_id, reason=""):
        """A person approved the held call: records the decision in toolsvc
        (with the approver key, when there is one) and sends the call again
        with its approval; returns that call's result. Without an approver
        key the decision must be made in toolsvc itself; the resend then
        answers approval_required again until it is."""
        o = self._calls[call_id]
        if not o.held:
            return o.result
        if self.approvals is not None:
            try:
                self.approvals.decide(o.approval_id, "approve", reason)
            except ToolsvcError as e:
                if e.status != 409:  # 409: decided already, maybe in toolsvc; the resend says how
                    raise
        result = self.client.invoke(o.name, o.arguments, approval_id=o.approval_id)
        self._calls[call_id] = Outcome(o.name, o.arguments, result)
        return result

    def reject(self, call_id, reason=""):
        """A person rejected the held call: records it in toolsvc, so that
        the audit log says who and why and the approval does not wait until
        it expires. Returns the approval as decided (None without an
        approver key)."""
        o = self._calls[call_id]
        if not o.held or self.approvals is None:
            return None
        try:
            return self.approvals.decide(o.approval_id, "reject", reason)
        except ToolsvcError as e:
            if e.status == 409:
                return self.approvals.get(o.approval_id)
            raise


def result_text(result):
    """What a model should read of a result: its text, as agent.py gives it."""
    return result.get("result", "") if isinstance(result, dict) else str(result)
