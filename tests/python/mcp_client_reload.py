"""The official MCP Python SDK sees wasmclaw's tool list change.

Usage: mcp_client_reload.py REVISION URL TOKEN

REVISION is `handshake` (`initialize`: the change comes as a notification on
the session) or `modern` (`server/discover`: the change comes on a
`subscriptions/listen` stream the client opens). Lists the tools of `/mcp`,
prints `listed` on a line of its own, waits for
`notifications/tools/list_changed` (a plugin was dropped into the
directory), lists again and prints both lists as one JSON object.
"""

import asyncio
import json
import sys

import anyio
import httpx2
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.subscriptions import listen
from mcp.client.streamable_http import streamable_http_client


async def main():
    revision, url, token = sys.argv[1:]
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    out = {}
    async with streamable_http_client(url, http_client=client) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            if revision == "handshake":
                await session.initialize()
                out["before"] = sorted(t.name for t in (await session.list_tools()).tools)
                print("listed", flush=True)
                with anyio.fail_after(60):
                    await changed.wait()
            else:
                await session.discover()
                async with listen(session, tools_list_changed=True) as subscription:
                    out["before"] = sorted(t.name for t in (await session.list_tools()).tools)
                    print("listed", flush=True)
                    with anyio.fail_after(60):
                        out["event"] = type(await subscription.__anext__()).__name__
            out["after"] = sorted(t.name for t in (await session.list_tools()).tools)
    print(json.dumps(out))


asyncio.run(main())
