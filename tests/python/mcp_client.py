"""The official MCP Python SDK against wasmclaw as an MCP server over stdio.

Usage: mcp_client.py REVISION COMMAND [ARG...]
       mcp_client.py REVISION --http URL TOKEN

REVISION is `handshake` (the `initialize` handshake) or `modern` (the
`server/discover` probe). The client starts COMMAND (`wasmclaw ... mcp`), or
talks streamable HTTP to URL (`/mcp` on `wasmclaw serve`) with the bearer
TOKEN; it lists the tools, calls `add` with good arguments, with a field of the wrong
type, an unknown tool and a plugin that traps, and prints what it saw as one
JSON object.
"""

import asyncio
import json
import sys

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def result(r):
    return {
        "is_error": bool(r.is_error),
        "text": [c.text for c in r.content if getattr(c, "type", None) == "text"],
    }


async def main():
    revision, command, *args = sys.argv[1:]
    if command == "--http":
        url, token = args
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        transport = streamable_http_client(url, http_client=client)
    else:
        transport = stdio_client(StdioServerParameters(command=command, args=args, env=None))
    out = {}
    async with transport as (read, write):
        async with ClientSession(read, write) as session:
            if revision == "handshake":
                init = await session.initialize()
                out["server"] = init.server_info.name
            else:
                found = await session.discover()
                meta = found.model_dump(by_alias=True).get("_meta") or {}
                out["server"] = meta["io.modelcontextprotocol/serverInfo"]["name"]
            tools = await session.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            add = next(t for t in tools.tools if t.name == "add")
            out["add_schema"] = add.input_schema
            out["add"] = result(await session.call_tool("add", {"a": 2, "b": 3}))
            out["bad_field"] = result(await session.call_tool("add", {"a": "two", "b": 2}))
            out["unknown"] = result(await session.call_tool("nope", {}))
            out["trap"] = result(await session.call_tool("trap", {}))
    print(json.dumps(out))


asyncio.run(main())
