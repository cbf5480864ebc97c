//! wasmclaw as an MCP client: the tools of Python and rmcp MCP servers in real turns.
