"""ACP over WebSocket: one JSON-RPC client per connection at path /acp, guarded by a bearer token and Origin.

Each accepted connection gets its own `WarpcodeAcpAgent` from the shared `AcpService`, served by the SDK's
`acp.run_agent` (connection.py) through `FrameTransport`, a small adapter from text frames to decoded JSON-RPC
messages. Each frame is checked by the rules `warpcode acp` applies to each line (jsonrpc_guard.py): what is not a
JSON-RPC 2.0 message is answered there (-32700, -32600) and never reaches the SDK. Limits: incoming frames over
`max_frame_bytes` close the connection (1009), at most `max_queue` received frames wait unread (the socket stops
reading beyond that), and sends wait while the client does not read, so a slow client applies backpressure instead
of growing server memory; at most `max_requests_in_flight` of a connection's requests are handled at a time, the
next ones refused at once (request_limit.py), and a client gone with answers unsent costs one log line. Outgoing
frames stay within `max_send_bytes`, what the SDK's own client accepts: updates are built small (frame_limits.py),
and a frame still over it is shrunk if it only shows something (session/update, session/request_permission), else
turned into an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from acp.meta import CLIENT_METHODS
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from warpcode.agent.frame_limits import CLIENT_FRAME_BYTES, shrink_to_fit
from warpcode.agent.service.agent import AcpService
from warpcode.agent.service.connection import serve_connection
from warpcode.agent.service.jsonrpc_guard import decode
from warpcode.agent.service.request_limit import MAX_IN_FLIGHT

ACP_PATH = "/acp"
# What the client only shows: a frame over its limit may be cut to fit (frame_limits.shrink_to_fit).
DISPLAY_ONLY_METHODS = {CLIENT_METHODS["session_update"], CLIENT_METHODS["session_request_permission"]}
# Headers the guard reads, or HTTP/1.1 wants once (RFC 9112 section 3.2): sent twice, the request is refused.
SINGLE_HEADERS = ("Host", "Origin", "Authorization")
log = logging.getLogger("warpcode.serve")


class FrameTooLarge(ValueError):
    """A request of ours that the client could not receive."""


@dataclass(frozen=True)
class ServerLimits:
    max_frame_bytes: int = 16 * 2**20  # a prompt with embedded files fits; a runaway client does not
    max_queue: int = 32  # received frames buffered before the socket stops reading
    max_send_bytes: int = CLIENT_FRAME_BYTES  # the largest frame we send: what the SDK's own client accepts
    max_requests_in_flight: int = MAX_IN_FLIGHT  # per connection; beyond, requests are refused at once

    def __post_init__(self) -> None:
        too_small = self.max_frame_bytes < 1024 or self.max_queue < 1 or self.max_send_bytes < 64 * 1024
        if too_small or self.max_requests_in_flight < 1:
            raise ValueError(f"server limits too small: {self}")


@dataclass(frozen=True)
class Guard:
    """Who may open a connection: the bearer token, and which browser origins (clients without Origin pass)."""

    token: str
    allowed_origins: frozenset[str] = field(default_factory=frozenset)

    def refusal(self, request: Request) -> tuple[HTTPStatus, str] | None:
        if request.path.split("?", 1)[0] != ACP_PATH:
            return HTTPStatus.NOT_FOUND, f"ACP is served at {ACP_PATH}\n"
        headers = request.headers
        for name in SINGLE_HEADERS:
            if len(headers.get_all(name)) > 1:  # which one would count? Another server may read the other
                return HTTPStatus.BAD_REQUEST, f"more than one {name} header: send it once\n"
        if "Host" not in headers:
            return HTTPStatus.BAD_REQUEST, "no Host header: HTTP/1.1 requires one\n"
        origin = headers.get("Origin")
        if origin is not None and origin not in self.allowed_origins:
            # A web page the user visits may open WebSockets to localhost: only listed origins get through.
            return HTTPStatus.FORBIDDEN, f"origin {origin!r} is not allowed (start the server with --allow-origin)\n"
        scheme, _, presented = headers.get("Authorization", "").partition(" ")
        # Header values arrive as ISO-8859-1 text (websockets.http11): back to their bytes, whatever they hold.
        presented_bytes = presented.strip().encode("iso-8859-1")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented_bytes, self.token.encode()):
            return HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token in the Authorization header\n"
        return None


class FrameTransport:
    """The SDK's message Transport over one server-side WebSocket connection."""

    def __init__(self, connection: ServerConnection, max_send_bytes: int = CLIENT_FRAME_BYTES) -> None:
        self._connection, self._max_send_bytes = connection, max_send_bytes

    async def send(self, message: dict[str, Any]) -> None:
        frame = json.dumps(message, separators=(",", ":"))
        if len(frame) > self._max_send_bytes:  # ASCII (json.dumps escapes the rest): characters are bytes
            frame = self._fitted(message, len(frame))
            if frame is None:
                return
        try:
            await self._connection.send(frame)
        except ConnectionClosed:
            raise ConnectionError("the client closed the connection") from None

    def _fitted(self, message: dict[str, Any], size: int) -> str | None:
        """A frame the client accepts for an oversized message: a display-only one shrunk, an answer replaced by
        an error saying why; None to send nothing (a notification that cannot shrink: logged)."""
        method, limit = message.get("method"), self._max_send_bytes
        over = f"{size / 2**20:.1f} MiB, over the client's {limit / 2**20:g} MiB frame limit"
        if method in DISPLAY_ONLY_METHODS and (frame := shrink_to_fit(message, limit)) is not None:
            log.warning("%s of %s: shrunk to fit", method, over)
            return frame
        if method is None:
            error = {"code": -32603, "message": f"The answer is {over}."}
            return json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "error": error})
        if "id" in message:  # our request (fs/write_text_file): it fails, and the tool says why
            raise FrameTooLarge(f"{method} is {over}")
        log.error("%s of %s: not sent", method, over)
        return None

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                frame = await self._connection.recv()
            except ConnectionClosed:
                return None
            verdict = decode(frame)
            if verdict.answer is not None:
                with contextlib.suppress(ConnectionError):  # gone: the next receive says so
                    await self.send(verdict.answer)
            elif verdict.message is not None:
                return verdict.message

    async def close(self) -> None:
        await self._connection.close()


class AcpWebSocketServer:
    """`warpcode serve`: many connections at once, many sessions per connection."""

    def __init__(self, service: AcpService, guard: Guard, limits: ServerLimits | None = None) -> None:
        self.service, self.guard, self.limits = service, guard, limits or ServerLimits()
        self._server: Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await serve(
            self._serve_connection,
            host,
            port,
            process_request=self._check_upgrade,
            process_response=self._log_refusal,
            max_size=self.limits.max_frame_bytes,
            max_queue=self.limits.max_queue,
            # Editors connect over loopback: per-message deflate would spend CPU and latency to save nothing.
            compression=None,
        )
        bound_host, bound_port = next(iter(self._server.sockets)).getsockname()[:2]
        return bound_host, bound_port

    async def serve_until_stopped(self, stop: asyncio.Event) -> None:
        assert self._server is not None, "start() first"
        await stop.wait()
        self._server.close()
        await self._server.wait_closed()

    def _check_upgrade(self, connection: ServerConnection, request: Request) -> Response | None:
        refusal = self.guard.refusal(request)
        return None if refusal is None else connection.respond(*refusal)

    def _log_refusal(self, connection: ServerConnection, request: Request, response: Response) -> None:
        """One line per refused upgrade: the guard's refusals and websockets' own (a malformed handshake)."""
        if response.status_code != HTTPStatus.SWITCHING_PROTOCOLS:
            reason = response.body.decode(errors="replace").partition("\n")[0]
            log.warning(
                "refused %s from %s: %d %s", request.path, connection.remote_address, response.status_code, reason
            )

    async def _serve_connection(self, connection: ServerConnection) -> None:
        agent = self.service.new_connection_agent()
        frames = FrameTransport(connection, self.limits.max_send_bytes)
        peer = f"client {connection.remote_address}"
        try:
            await serve_connection(agent, frames, self.limits.max_requests_in_flight, peer)
        finally:
            await agent.close()  # a dropped connection cancels its running turns
