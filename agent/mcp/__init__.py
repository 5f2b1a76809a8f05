"""MCP servers (Model Context Protocol) whose tools the model can call beside ours, through the official `mcp` SDK.

specs.py: which servers a session connects to (the client's `mcpServers`, the config file's `[mcp_servers.NAME]`);
connection.py: one server's connection (stdio or streamable HTTP); naming.py: the tools' names for the model;
adapter.py: their schemas and results; session_tools.py: a session's servers as the agent loop uses them.
"""
