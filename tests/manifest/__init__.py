"""TOOL.md parsing, input schemas, static checks (tools_app/manifest/)."""
