"""A stdio MCP server for the extension's tests, written with the official `mcp` SDK (mcp 2's MCPServer): one tool,
`getenv`, which answers with an environment variable of its own process, so a test can see that the server the
extension's settings name was started with the settings' env.

    python notes_mcp_server.py
"""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool(description="An environment variable of this server's process.")
def getenv(name: str) -> str:
    return os.environ.get(name, "(unset)")


if __name__ == "__main__":
    server.run()
