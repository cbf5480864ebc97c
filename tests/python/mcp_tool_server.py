"""An MCP server for the MCP client tests, on the official Python SDK.

    mcp_tool_server.py stdio
    mcp_tool_server.py http PORT
    mcp_tool_server.py fail        (writes to stderr and exits at once)
    mcp_tool_server.py silent      (a bare 2025-11-25 server over stdio that
                                    ignores requests it does not know,
                                    `server/discover` among them; one tool, echo)

Tools: echo, add (a name the `echo` test plugin also offers), crash (the
process exits mid-call), hang (never answers; it appends "started hang" to the file
named by MCP_MARK, and "cancelled hang" when cancelled; over stdio the
server appends "server started" there when it starts), huge (2 MB of text),
grow (adds the tool `extra` and says the list changed), fails (a tool
error), and `not.a.model.name` (a name model APIs refuse: the client must
leave it out). The header `x-test-key`, when sent, is echoed by `whoami`.
"""

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("mcp-tool-server")


@server.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> str:
    """Adds two numbers (the server's own add)."""
    return f"mcp sum {a + b}"


@server.tool(name="not.a.model.name")
def badly_named() -> str:
    """A tool no model request may carry."""
    return "never offered"


@server.tool()
def crash() -> str:
    """Exits the server in the middle of the call."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


def _mark(line: str) -> None:
    mark = os.environ.get("MCP_MARK")
    if mark:
        with open(mark, "a") as f:
            f.write(line + "\n")


@server.tool()
async def hang() -> str:
    """Never answers."""
    _mark("started hang")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        _mark("cancelled hang")
        raise
    return "woke"


@server.tool()
def huge() -> str:
    """2,000,000 bytes of text."""
    return "x" * 2_000_000


@server.tool()
def fails() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


_grown = {"relisted": None}
_list_tools = server.list_tools


async def _counting_list_tools():
    tools = await _list_tools()
    if _grown["relisted"] is not None:
        _grown["relisted"].set()
    return tools


server.list_tools = _counting_list_tools


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra`, tells the client the list changed and answers
    once the client listed the tools again."""
    _grown["relisted"] = anyio.Event()
    server.add_tool(lambda: "extra ran", name="extra", description="Added by grow.")
    # 2025-11-25 sends the notification on the session; at 2026-07-28 it
    # goes only to the client's `subscriptions/listen` stream (the bus).
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    with anyio.fail_after(10):
        await _grown["relisted"].wait()
    # The client takes the new list in after the answer to tools/list.
    await anyio.sleep(0.2)
    return "grown"


@server.tool()
def whoami(ctx: Context) -> str:
    """The x-test-key header of the request, if any."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None) or {}
    return f"key={headers.get('x-test-key', '')}"


def serve_silent() -> None:
    """Answers initialize, tools/list and tools/call of echo; ignores the
    rest. Appends each method it receives to the file named by MCP_MARK."""
    import json

    echo_tool = {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
    for line in sys.stdin:
        message = json.loads(line)
        method, params = message.get("method"), message.get("params") or {}
        _mark(method)
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "silent", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [echo_tool]}
        elif method == "tools/call":
            text = (params.get("arguments") or {}).get("text", "")
            result = {"content": [{"type": "text", "text": f"silent echo: {text}"}]}
        else:
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "fail":
        print("cannot start: no database", file=sys.stderr, flush=True)
        sys.exit(2)
    elif mode == "silent":
        serve_silent()
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        _mark("server started")
        server.run()
