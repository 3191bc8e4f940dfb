"""The agent API, the registry formats, tokens and MCP (tools_app/api/)."""
