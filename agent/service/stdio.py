"""ACP over stdin/stdout for `warpcode acp`: one JSON-RPC message per line, as the SDK frames them.

The SDK builds its stdio transport inside `acp.run_agent`, out of reach of a wrapper, and that transport hands
on whatever a line decodes to (an array kills its receive loop) and only logs a line that is not JSON. `LineTransport`
is the same transport with each line checked by jsonrpc_guard.py, as `warpcode serve` checks each frame.
"""

from __future__ import annotations

import contextlib
from typing import Any

from acp._transport import NdjsonTransport  # the SDK's own stdio transport; not re-exported
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
from acp.stdio import stdio_streams
from acp.task import MessageSender, TaskSupervisor

from warpcode.agent.service.connection import serve_connection
from warpcode.agent.service.jsonrpc_guard import decode
from warpcode.agent.service.request_limit import MAX_IN_FLIGHT


class LineTransport(NdjsonTransport):
    """Newline-delimited JSON-RPC, each line decoded and checked: refused lines are answered, not handed on."""

    async def receive(self) -> dict[str, Any] | None:
        while line := await self._read_line():
            if not line.strip():
                continue
            verdict = decode(line)
            if verdict.answer is not None:
                with contextlib.suppress(ConnectionError):  # the editor is gone: the next read says so
                    await self.send(verdict.answer)
            elif verdict.message is not None:
                return verdict.message
        return None


async def serve_stdio(agent: Any, max_in_flight: int = MAX_IN_FLIGHT) -> None:
    """The agent served over stdin/stdout until the editor closes stdin."""
    reader, writer = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    transport = LineTransport(reader, MessageSender(writer, TaskSupervisor(source="warpcode.stdio")))
    await serve_connection(agent, transport, max_in_flight, "the editor")
