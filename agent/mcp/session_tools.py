"""A session's MCP servers and their tools, as the agent loop uses them.

`McpTools` starts every server at once when the session opens (in the background: session/new answers at once);
the turn waits for them with `ready()` before its first model request, each server at most its startup timeout.
A server that cannot start, or that stops mid-session, is told to the user once (`take_notices`, which the loop
sends as a message) and its tools are no longer offered; the session goes on with the others. A call to a tool
of a stopped server, or one that outlasts the server's tool timeout, fails with a message saying so. `close`
stops every server (the session's end: session/close, a closed connection, the service stopping).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from warpcode.agent.mcp import adapter
from warpcode.agent.mcp.connection import McpConnection, ServerError
from warpcode.agent.mcp.naming import tool_name
from warpcode.agent.mcp.specs import McpServerSpec, Skipped
from warpcode.agent.toolbox import ToolResult

log = logging.getLogger(__name__)


class McpTools:
    def __init__(self, servers: Sequence[McpServerSpec | Skipped], cwd: str) -> None:
        skipped = [s for s in servers if isinstance(s, Skipped)]
        self._notices = [f"MCP server '{s.name}' was not connected: {s.reason}." for s in skipped]
        specs = [s for s in servers if isinstance(s, McpServerSpec)]
        self._connections = [McpConnection(spec, cwd) for spec in specs]
        self._routes: dict[str, tuple[McpConnection, str]] = {}  # model's name -> (server, the server's name)
        self._specs: dict[str, dict[str, Any]] = {}  # model's name -> its function spec
        self._told_stopped: set[str] = set()
        self._up: list[McpConnection] = []  # the servers that started
        self._schema_tokens: tuple[tuple[str, ...], int] = ((), 0)  # the offered tools' names, their schemas' tokens
        self._starting = asyncio.ensure_future(self._start_all())

    async def ready(self) -> None:
        """Wait until every server has started or failed to."""
        await asyncio.shield(self._starting)

    def schemas(self) -> list[dict[str, Any]]:
        """The running servers' tools, in the OpenAI function-tool format."""
        return [spec for name, spec in self._specs.items() if self._routes[name][0].alive]

    def schema_tokens(self, count: Callable[[str], int]) -> int:
        """The tokens the offered tools' specs take in a request, by the backend's `count` (counted again only
        when the offered tools change)."""
        schemas = self.schemas()
        names = tuple(spec["function"]["name"] for spec in schemas)
        if names != self._schema_tokens[0]:
            self._schema_tokens = names, count(json.dumps(schemas)) if schemas else 0
        return self._schema_tokens[1]

    def owns(self, name: str) -> bool:
        return name in self._routes

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        connection, tool = self._routes[name]
        server = connection.spec.name
        if not connection.alive:
            message = f"The MCP server '{server}' has stopped: its tools cannot be used in this session any more."
            return ToolResult(False, message, error="McpServerStopped")
        try:
            result = await connection.call(tool, arguments)
        except ServerError as exc:
            self._notice_if_stopped(connection)
            message = f"The MCP tool {tool} was not answered: server '{server}' {exc}."
            return ToolResult(False, message, error="McpError")
        ok, text = adapter.observation(result)
        if not ok:
            message = f"The MCP tool {tool} of server '{server}' reported an error: {text}"
            return ToolResult(False, message, error="McpToolError")
        return ToolResult(True, text)

    def take_notices(self) -> list[str]:
        """What the user has not been told yet about the servers (failed starts, stopped servers)."""
        for connection in self._connections:
            self._notice_if_stopped(connection)
        notices, self._notices = self._notices, []
        return notices

    async def close(self) -> None:
        self._starting.cancel()
        await asyncio.gather(self._starting, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self._connections), return_exceptions=True)

    async def _start_all(self) -> None:
        results = await asyncio.gather(*(c.start() for c in self._connections), return_exceptions=True)
        for connection, failure in zip(self._connections, results, strict=True):
            server = connection.spec.name
            if isinstance(failure, ServerError):
                self._notices.append(f"MCP server '{server}' {failure}. Its tools are not available in this session.")
                self._told_stopped.add(server)
                continue
            if isinstance(failure, BaseException):  # a bug of ours: still one server less, not a broken session
                log.error("MCP server %r: %r", server, failure)
                self._notices.append(f"MCP server '{server}' could not start: {failure!r}.")
                self._told_stopped.add(server)
                continue
            self._up.append(connection)
            self._add_tools(connection)

    def _add_tools(self, connection: McpConnection) -> None:
        server = connection.spec.name
        for tool in connection.tools:
            name = tool_name(server, tool.name)
            if name in self._routes:  # two servers of one name, or a server listing a tool twice
                self._notices.append(f"MCP server '{server}': a second tool named {name} was left out.")
                continue
            self._routes[name] = (connection, tool.name)
            self._specs[name] = adapter.tool_spec(name, server, tool)
        if connection.tools_cut:
            self._notices.append(
                f"MCP server '{server}' lists {len(connection.tools) + connection.tools_cut} tools: only its first "
                f"{len(connection.tools)} are offered to the model."
            )
        if connection.garbage_lines:
            self._notices.append(
                f"MCP server '{server}' wrote lines that are not MCP messages on its stdout (skipped): it should log "
                f"to stderr."
            )

    def _notice_if_stopped(self, connection: McpConnection) -> None:
        server = connection.spec.name
        if connection.alive or server in self._told_stopped or connection not in self._up:
            return
        self._told_stopped.add(server)
        self._notices.append(f"MCP server '{server}' has stopped. Its tools are no longer available in this session.")
