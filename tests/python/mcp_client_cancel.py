"""The official MCP Python SDK cancels a call to wasmclaw's `/mcp`.

Usage: mcp_client_cancel.py REVISION URL TOKEN

REVISION is `handshake` (`initialize`) or `modern` (`server/discover`).

Calls `spin` (a plugin that never returns), gives up on it after a moment
(the SDK sends `notifications/cancelled`), then calls `add` on the same
session, then `sleep` for 2.5 s asking for progress, and prints what it saw as one JSON object.
"""

import asyncio
import json
import sys

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main():
    revision, url, token = sys.argv[1:]
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    out = {}
    async with streamable_http_client(url, http_client=client) as (read, write):
        async with ClientSession(read, write) as session:
            if revision == "handshake":
                await session.initialize()
            else:
                await session.discover()
            with anyio.move_on_after(2) as scope:
                await session.call_tool("spin", {})
            out["spin_cancelled"] = scope.cancelled_caught
            r = await session.call_tool("add", {"a": 2, "b": 3})
            out["add"] = [c.text for c in r.content]
            notes = []

            async def on_progress(progress, total, message):
                notes.append(message)

            r = await session.call_tool("sleep", {"ms": 2500}, progress_callback=on_progress)
            out["sleep_error"] = bool(r.is_error)
            out["progress"] = notes[:1]
    print(json.dumps(out))


asyncio.run(main())
