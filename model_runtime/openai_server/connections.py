"""Connections that cannot pile up: uvicorn's h11 protocol with a deadline for each request's head and a cap on
open connections.

uvicorn times out idle kept-alive connections, but any byte resets that timer, and a connection that never
finishes its request line and headers is kept forever: a client trickling headers (or just opening sockets) can
hold every file descriptor the server has. Here each request head (request line and headers) must be complete
within `head_timeout_s` of when it could start (the connection opening, or the previous response ending), and
connections past `max_connections` are closed as they arrive. The body has its own deadline (guard.py).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


def bounded_h11(head_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with these bounds, as the class uvicorn.Config takes for `http`."""
    if head_timeout_s <= 0 or max_connections < 1:
        raise ValueError(f"connection limits too small: head_timeout_s={head_timeout_s}, max={max_connections}")

    class BoundedH11Protocol(H11Protocol):
        _head_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.abort()  # connection_lost follows and forgets it
                return
            self._expect_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._expect_head()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_deadline is not None:
                self._head_deadline.cancel()
            super().connection_lost(exc)

        def _expect_head(self) -> None:
            if self._head_deadline is not None:
                self._head_deadline.cancel()
            self._head_deadline = self.loop.call_later(head_timeout_s, self._head_overdue)

        def _head_overdue(self) -> None:
            waiting_for_a_head = self.cycle is None or self.cycle.response_complete
            if waiting_for_a_head and not self.transport.is_closing():
                self.transport.close()

    return BoundedH11Protocol
