"""A bound on each connection's requests in flight: the SDK runs one task per request, however many arrive.

`RequestLimiter` wraps a connection's Transport. It counts the client's requests handed to the SDK whose answers
are not sent yet; beyond `max_in_flight` it answers further requests at once with TOO_MANY_REQUESTS instead of
handing them on. That answer is sent like any other, so a client that does not read stops being read: its
pipelined requests wait in its own socket, not in server memory. Nothing else is held back: the client's
notifications (session/cancel) and its answers to our own requests (permission answers, fs replies) always
pass, so turns waiting for those answers cannot deadlock a full connection. When the connection ends, the
requests still unanswered cost one log line, not one each. Messages reach it checked (jsonrpc_guard.py): a
request's id is a string, an integer or null.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from typing import Any

MAX_IN_FLIGHT = 64
TOO_MANY_REQUESTS = -32003  # JSON-RPC server-defined error (ACP uses -32000 and -32002; SESSION_BUSY is -32001)
log = logging.getLogger(__name__)


class RequestLimiter:
    """A Transport that hands the SDK at most `max_in_flight` unanswered client requests at a time."""

    def __init__(self, inner: Any, max_in_flight: int = MAX_IN_FLIGHT, peer: str = "the client") -> None:
        self._inner, self._max_in_flight, self._peer = inner, max_in_flight, peer
        self._in_flight: Counter[tuple[str, Any]] = Counter()  # (id type, id) -> unanswered requests with it
        self._count = 0

    async def send(self, message: dict[str, Any]) -> None:
        key = _id_key(message.get("id"))
        if "method" in message or self._in_flight[key] == 0:
            await self._inner.send(message)  # ours, or an answer we never counted
            return
        try:
            await self._inner.send(message)
        except ConnectionError:  # the client left: nobody to tell, and no traceback per request (see close)
            return
        self._in_flight[key] -= 1
        self._count -= 1

    async def receive(self) -> dict[str, Any] | None:
        while (message := await self._inner.receive()) is not None:
            if "method" not in message or "id" not in message:
                return message  # a notification, or an answer to one of our requests
            request_id = message["id"]
            if self._count >= self._max_in_flight:
                why = f"Too many requests in flight on this connection ({self._count}): wait for answers first."
                await self._refuse(request_id, TOO_MANY_REQUESTS, why)
            else:
                self._in_flight[_id_key(request_id)] += 1
                self._count += 1
                return message
        return None

    async def close(self) -> None:
        """The connection ends (the SDK then cancels the requests still running): one line for all of them."""
        if self._count:
            log.warning("%s left with %d requests unanswered", self._peer, self._count)
        await self._inner.close()

    async def _refuse(self, request_id: Any, code: int, message: str) -> None:
        with contextlib.suppress(ConnectionError):  # gone: the next receive says so
            await self._inner.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def _id_key(request_id: Any) -> tuple[str, Any]:
    return type(request_id).__name__, request_id  # 1 and "1" are different ids
