#!/usr/bin/env python3
"""toolsvc's tools in the OpenAI Agents SDK, with toolsvc's approval hold
as the SDK's human-in-the-loop flow (needs_approval, result.interruptions,
state.approve / state.reject, Runner.run(agent, state)).

NOT RUN HERE: the SDK (pip install openai-agents) could not be installed
where this example was written, so this file was written against the
SDK's documentation (docs/human_in_the_loop.md and
examples/agent_patterns/human_in_the_loop.py of openai-agents-python) and
has not been run. The toolsvc half it stands on, toolsvc_approval.py, is
standard library only and is tested against the real service
(test_toolsvc_approval.py). See README_approval.md.

    pip install openai-agents
    TOOLS_URL=http://127.0.0.1:8080 TOOLS_KEY=$AGENT_KEY APPROVER_KEY=$OPS_KEY OPENAI_API_KEY=... \\
        python3 examples/python/agents_sdk_approval.py "Push the release branch."

How the two fit: toolsvc, not the SDK, decides which calls wait (its
policy file's approval rules). The SDK asks a tool's needs_approval before
it runs a call, so needs_approval sends the call to toolsvc: a call no
rule holds runs there and then, and its result is kept for the SDK's
on_invoke_tool, which returns it without sending the call again; a held
call has not run, and needs_approval answers True, so the run stops with
an interruption. The person's answer goes to toolsvc too:
approved, it is recorded there (POST /approvals/{id} with APPROVER_KEY)
and the call is sent again with its X-Approval, so it runs once, and on
resume on_invoke_tool returns that result; rejected, it is recorded with
the reason and the SDK tells the model. Without APPROVER_KEY the decision
is made in toolsvc (GET /approvals, by an approver), and a resend before
it answers that the call still waits.
"""

import asyncio
import json
import os
import sys

from agents import Agent, FunctionTool, Runner

import toolsvc_approval as ta


def toolsvc_tools(calls):
    """One FunctionTool per toolsvc tool (GET /tools), each going through
    calls (ta.HeldCalls) so that toolsvc's hold becomes the SDK's."""
    tools = []
    for d in calls.client.definitions():
        fn = d["function"]
        tools.append(_tool(calls, fn["name"], fn.get("description", ""), fn.get("parameters") or {"type": "object"}))
    return tools


def _tool(calls, name, description, schema):
    async def needs_approval(_ctx, params, call_id):
        # Sends the call: toolsvc runs it now, or holds it without running.
        outcome = await asyncio.to_thread(calls.first, call_id, name, params)
        return outcome.held

    async def on_invoke(ctx, arguments):
        call_id = ctx.tool_call_id
        outcome = calls.outcome(call_id)
        if outcome is None:  # needs_approval was not asked: send it now
            outcome = await asyncio.to_thread(calls.first, call_id, name, json.loads(arguments or "{}"))
        if outcome.held:  # approved in the SDK: send it again with its approval
            return ta.result_text(await asyncio.to_thread(calls.approve, call_id))
        return ta.result_text(outcome.result)

    # toolsvc checks the arguments against the schema itself; the SDK's
    # strict mode would rewrite optional parameters, so it is off.
    return FunctionTool(name=name, description=description, params_json_schema=schema,
                        on_invoke_tool=on_invoke, strict_json_schema=False, needs_approval=needs_approval)


def call_id_of(calls, interruption):
    """The model's call ID of an interruption (a ToolApprovalItem)."""
    for holder in (interruption, getattr(interruption, "raw_item", None)):
        cid = getattr(holder, "call_id", None)
        if cid:
            return cid
    try:
        args = json.loads(interruption.arguments or "{}")
    except ValueError:
        return None
    return calls.find(interruption.name, args)


def ask(calls, interruption):
    """The person's decision, on the terminal: what toolsvc says the call
    will do, and its approval's expiry."""
    outcome = calls.outcome(call_id_of(calls, interruption))
    what = outcome.summary if outcome else f"{interruption.name} {interruption.arguments}"
    print(f"\nThe agent wants to: {what}", file=sys.stderr)
    if outcome and outcome.expires_at:
        print(f"(toolsvc approval {outcome.approval_id}, open until {outcome.expires_at})", file=sys.stderr)
    answer = input("Approve? [y/N] ").strip().lower()
    reason = "" if answer in ("y", "yes") else input("Why not? ").strip()
    return answer in ("y", "yes"), reason


async def main(task):
    url = os.environ.get("TOOLS_URL", "http://127.0.0.1:8080")
    client = ta.Client(url, key=os.environ.get("TOOLS_KEY"), session=os.environ.get("AGENT_SESSION", f"sdk-{os.getpid()}"))
    approver = os.environ.get("APPROVER_KEY")
    calls = ta.HeldCalls(client, ta.Approvals(url, approver) if approver else None)
    agent = Agent(name="toolsvc agent", instructions="You work in a workspace through the tools you have.",
                  tools=toolsvc_tools(calls))

    result = await Runner.run(agent, task)
    while result.interruptions:
        state = result.to_state()
        for interruption in result.interruptions:
            ok, reason = await asyncio.to_thread(ask, calls, interruption)
            cid = call_id_of(calls, interruption)
            if ok:
                if cid:  # record it in toolsvc and run it there, once
                    await asyncio.to_thread(calls.approve, cid, "approved in the agent's terminal")
                state.approve(interruption)
            else:
                if cid:  # toolsvc's audit log says who rejected it and why
                    await asyncio.to_thread(calls.reject, cid, reason)
                state.reject(interruption)
        result = await Runner.run(agent, state)
    print(result.final_output)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: agents_sdk_approval.py 'task for the agent'")
    asyncio.run(main(sys.argv[1]))
