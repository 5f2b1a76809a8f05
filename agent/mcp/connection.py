"""One MCP server's connection, through the official `mcp` SDK's `Client` (stdio or streamable HTTP).

The SDK's client lives in anyio task groups and cancel scopes, which must be left by the task that entered
them: so each connection has a task of its own that enters the client, lists the tools and then waits for
`close`; tool calls from the agent's turn go through the open client. A start that takes longer than the
server's `startup_timeout_s` is cancelled through that task's cancel scope, and the SDK's shielded shutdown
stops a stdio server whatever happens: stdin closed, then, when it has not exited within 2 s, SIGTERM and SIGKILL
to its process group (the SDK starts it in a session of its own).

A stdio server's stderr goes through a pipe whose last lines are kept, so that a server that fails says why in
its own words ("ModuleNotFoundError: ..."), and lines that are not MCP messages on its stdout (a server logging
to the wrong stream) are counted and skipped, not fatal. The `mcp` package is imported when a session first
connects to a server: it costs a second, which sessions without MCP servers do not pay.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import threading
from collections import deque
from importlib import metadata
from typing import Any

from warpcode.agent.mcp.specs import McpServerSpec

MAX_TOOLS_PER_SERVER = 128  # every tool's schema is in every request: a server listing thousands is cut
MAX_LIST_PAGES = 16
CLOSE_S = 10.0  # the SDK's stdio shutdown waits at most 2 s + 2 s + 2 s
STDERR_LINES = 10
STDERR_CHARS = 600
log = logging.getLogger(__name__)


class ServerError(Exception):
    """A server could not be used, in the user's words: "could not start: ...", "stopped: ..."."""


class McpConnection:
    def __init__(self, spec: McpServerSpec, cwd: str) -> None:
        self.spec, self.cwd = spec, cwd
        self.tools: list[Any] = []  # the MCP Tool models it listed (at most MAX_TOOLS_PER_SERVER)
        self.tools_cut = 0  # how many more it listed
        self.garbage_lines = 0  # lines on its stdout that were not MCP messages
        self._client: Any = None
        self._scope: Any = None  # the anyio cancel scope of the connection's task
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stderr = _StderrTail(spec.name) if spec.transport == "stdio" else None
        self._task: asyncio.Task[None] | None = None
        self._http_refusal: int | None = None  # the last 4xx/5xx status of an HTTP server (the SDK keeps none)

    @property
    def alive(self) -> bool:
        return self._client is not None

    async def start(self) -> None:
        """Connect and list the tools; ServerError saying why not, within `startup_timeout_s`."""
        self._task = asyncio.create_task(self._run(), name=f"warpcode.mcp.{self.spec.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.spec.startup_timeout_s)
        except TimeoutError:
            await self.close()
            raise ServerError(
                f"did not answer within {self.spec.startup_timeout_s:g} s (starting, initializing and listing its "
                f"tools){self._stderr_note()}"
            ) from None
        except ServerError:
            await self.close()
            raise

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's CallToolResult; ServerError when the server does not answer in time, answers with an error
        or something that is not a result, or is gone (then `alive` is False from here on)."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = self._client
        if client is None:
            raise ServerError("is not running")
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=self.spec.tool_timeout_s)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ServerError(f"did not answer within {self.spec.tool_timeout_s:g} s") from None
            if exc.code == CONNECTION_CLOSED:
                self._client = None
                raise ServerError(f"stopped{self._stderr_note()}") from None
            raise ServerError(f"refused the call: {exc}") from None
        except Exception as exc:  # a malformed result, a broken HTTP exchange: an answer for the model, not a crash
            raise ServerError(f"failed: {_reason(exc, self.spec.transport)}") from None

    async def close(self) -> None:
        """Stop the server (a stdio server's process group with it); waits at most CLOSE_S."""
        self._client = None
        self._stop.set()
        if self._scope is not None and not self._ready.done():
            self._scope.cancel()  # still starting: nothing to finish politely
        if self._task is not None:
            done, _ = await asyncio.wait([self._task], timeout=CLOSE_S)
            if not done:
                log.error("MCP server %r did not stop within %.0f s", self.spec.name, CLOSE_S)
        if self._stderr is not None:  # never started (closed first): its reader thread still waits for EOF
            self._stderr.writer.close()

    async def _run(self) -> None:
        try:
            await asyncio.to_thread(_import_sdk)  # a second of imports, which would stall every session's updates
            if self._stop.is_set():  # closed meanwhile
                return
            import anyio

            with anyio.CancelScope() as self._scope:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    await self._list_tools(client)
                    self._client = client
                    self._ready.set_result(None)
                    await self._stop.wait()
        except Exception as exc:  # the SDK raises transport errors as they come (and in exception groups)
            reason = _reason(exc, self.spec.transport)
            if self._http_refusal is not None:
                advice = ": check its headers (Authorization)" if self._http_refusal in (401, 403) else ""
                reason += f" (HTTP {self._http_refusal}{advice})"
            if not self._ready.done():
                self._ready.set_exception(ServerError(f"could not start: {reason}{self._stderr_note()}"))
            else:
                log.warning("MCP server %r: its connection ended: %s", self.spec.name, reason)
        finally:
            self._client = None
            if not self._ready.done():
                self._ready.set_exception(ServerError("was stopped while starting"))
            self._ready.exception()  # read here: a start that timed out no longer awaits it

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import logger as stdio_log
        from mcp.client.stdio import stdio_client
        from mcp.types import Implementation

        if _quiet_parse_failures not in stdio_log.filters:
            stdio_log.addFilter(_quiet_parse_failures)

        if self.spec.transport == "http":
            import httpx2  # the SDK's HTTP client: its streamable HTTP transport takes one for the headers
            from mcp.client.streamable_http import streamable_http_client

            # The SDK's recommended timeouts (a response stream may stay open for minutes), with the headers.
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(self.spec.headers),
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    event_hooks={"response": [self._note_refusal]},
                )
            )
            transport: Any = streamable_http_client(self.spec.url, http_client=http)
        else:
            env = dict(self.spec.env) or None
            command, args = self.spec.command, list(self.spec.args)
            parameters = StdioServerParameters(command=command, args=args, env=env, cwd=self.cwd)
            transport = stdio_client(parameters, errlog=self._stderr.writer)
        client = Client(
            transport, client_info=Implementation(name="warpcode", version=_version()), message_handler=self._on_message
        )
        try:
            return await stack.enter_async_context(client)
        finally:
            if self._stderr is not None:  # the server process holds its own copy: EOF comes when it exits
                self._stderr.writer.close()

    async def _list_tools(self, client: Any) -> None:
        cursor, listed = None, []
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or len(listed) > MAX_TOOLS_PER_SERVER:
                break
        self.tools, self.tools_cut = listed[:MAX_TOOLS_PER_SERVER], max(len(listed) - MAX_TOOLS_PER_SERVER, 0)

    async def _note_refusal(self, response: Any) -> None:
        if response.status_code >= 400:
            self._http_refusal = response.status_code

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a stdout line the SDK could not parse: skipped, counted
            self.garbage_lines += 1

    def _stderr_note(self) -> str:
        tail = self._stderr.tail() if self._stderr else ""
        return f". Its stderr ended with: {tail}" if tail else ""


def _import_sdk() -> None:
    importlib.import_module("mcp.client.stdio")
    importlib.import_module("mcp.client.streamable_http")  # httpx2 with it


def _quiet_parse_failures(record: logging.LogRecord) -> bool:
    """The SDK logs a traceback for every stdout line that is not an MCP message; we count them (one notice)."""
    return record.msg != "Failed to parse JSONRPC message from server"


def _version() -> str:
    try:
        return metadata.version("warpcode")
    except metadata.PackageNotFoundError:
        return "unknown"


def _reason(exc: BaseException, transport: str) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"no such program {exc.filename or ''}".strip()
    if getattr(exc, "code", None) == -32000:  # the SDK's CONNECTION_CLOSED
        return "it exited" if transport == "stdio" else "it closed the connection"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _StderrTail:
    """A stdio server's stderr: a pipe read by a thread that keeps its last lines and logs each at debug level."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lines: deque[str] = deque(maxlen=STDERR_LINES)
        read_fd, write_fd = os.pipe()
        self.writer: Any = os.fdopen(write_fd, "w")  # for the server process (stdio_client's errlog)
        self._thread = threading.Thread(target=self._read, args=(read_fd,), daemon=True, name=f"mcp-stderr-{name}")
        self._thread.start()

    def tail(self, wait_s: float = 0.5) -> str:
        """The last lines, once the server's stderr has ended (or after `wait_s`)."""
        self._thread.join(wait_s)
        text = " | ".join(line for line in self._lines if line.strip())
        return text if len(text) <= STDERR_CHARS else "…" + text[-STDERR_CHARS:]

    def _read(self, fd: int) -> None:
        with open(fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode(errors="replace").rstrip()
                self._lines.append(line)
                log.debug("MCP server %r: %s", self.name, line)
