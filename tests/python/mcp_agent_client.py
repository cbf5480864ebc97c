"""The official MCP Python SDK handing tasks to wasmclaw agents served as MCP
tools, and answering the approval questions they ask.

Usage: mcp_agent_client.py REVISION ANSWER COMMAND [ARG...]

REVISION is `handshake` (the `initialize` handshake: the server asks with
`elicitation/create` requests) or `modern` (the `server/discover` probe: the
server answers `input_required` and this client calls again with its
answers). ANSWER is what the user answers every question: `accept`,
`decline`, or `none` (the client offers no elicitation at all).

The client starts COMMAND (`wasmclaw ... mcp`), lists the tools, hands the
agent `helper` a task that needs no tool and one that calls `echo` (under an
`ask` rule), calls `echo` itself (also under an `ask` rule), sends a forged `requestState`, and prints as
one JSON object the results, the questions it was asked and how many
`input_required` rounds it went through.
"""

import asyncio
import json
import sys

from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def result(r):
    return {
        "is_error": bool(r.is_error),
        "text": [c.text for c in r.content if getattr(c, "type", None) == "text"],
    }


async def main():
    revision, answer, command, *args = sys.argv[1:]
    out = {"asked": [], "rounds": 0}

    def reply(params):
        out["asked"].append(
            {
                "message": params.message,
                "fields": sorted(params.requested_schema.get("properties", {})),
            }
        )
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"scope": "once"})
        return types.ElicitResult(action="decline")

    async def on_elicit(context, params):
        return reply(params)

    callback = None if answer == "none" else on_elicit
    transport = stdio_client(StdioServerParameters(command=command, args=args, env=None))
    async with transport as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            if revision == "handshake":
                await session.initialize()
            else:
                await session.discover()
            tools = await session.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            agent = next(t for t in tools.tools if t.name == "agent__helper")
            out["agent_schema"] = agent.input_schema

            async def call(name, arguments):
                responses, state = None, None
                for _ in range(10):
                    r = await session.call_tool(
                        name,
                        arguments,
                        input_responses=responses,
                        request_state=state,
                        allow_input_required=True,
                    )
                    if not isinstance(r, types.InputRequiredResult):
                        return result(r)
                    out["rounds"] += 1
                    responses = {
                        key: reply(request.params).model_dump(by_alias=True, exclude_none=True)
                        for key, request in (r.input_requests or {}).items()
                    }
                    state = r.request_state
                raise RuntimeError("more than 10 rounds")

            out["plain"] = await call("agent__helper", {"task": "say hi"})
            out["with_tool"] = await call("agent__helper", {"task": "echo secret-1"})
            out["direct"] = await call("echo", {"text": "direct-2"})
            out["no_task"] = await call("agent__helper", {})
            # A requestState the server never handed out names no call.
            try:
                await session.call_tool(
                    "echo",
                    {"text": "forged"},
                    input_responses={"c1": {"action": "accept"}},
                    request_state="0" * 32,
                    allow_input_required=True,
                )
                out["forged"] = "answered"
            except Exception as e:
                out["forged"] = str(e)
    print(json.dumps(out))


asyncio.run(main())
