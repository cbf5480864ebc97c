//! wasmclaw as an MCP server: the plugins' tools and the named agents.
