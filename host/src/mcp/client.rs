//! wasmclaw as an MCP client: the servers of `[mcp.servers.NAME]`.
