//! wasmclaw as an MCP server: the Python SDK's client over stdio and HTTP.
