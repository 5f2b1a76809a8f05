"""Serving the app: uvicorn on the socket bound up front (bound_socket.py), quiet except for warnings, stopping
on SIGINT/SIGTERM with exit code 0 like `warpcode serve`;
request heads have a deadline and open connections a cap (connections.py)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator

import uvicorn

from warpcode.model_runtime.openai_server.bound_socket import base_url, bind
from warpcode.model_runtime.openai_server.connections import bounded_h11

__all__ = ["LISTENING", "ModelServer", "base_url", "bind", "listening_url"]

LISTENING = "warpcode serve-model: OpenAI API on"  # the start-up line on stderr; tests read the URL from it
HEAD_TIMEOUT_S = 10.0  # to send a request line and headers
MAX_CONNECTIONS = 1024  # open at once; beyond, new ones are closed as they arrive


def listening_url(stderr_line: str) -> str | None:
    """The http://.../v1 URL from serve-model's start-up line, None for any other line."""
    if not stderr_line.startswith(LISTENING):
        return None
    return stderr_line[len(LISTENING) :].split()[0]


class ModelServer(uvicorn.Server):
    """uvicorn on an already bound socket; `on_listening` runs once it accepts connections."""

    def __init__(
        self,
        app,
        sock: socket.socket,
        on_listening: Callable[[], None] | None = None,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        config = uvicorn.Config(
            app,
            http=bounded_h11(head_timeout_s, max_connections),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,  # for streams to end before they are cancelled (and their requests freed)
        )
        super().__init__(config)
        self.sock, self.on_listening = sock, on_listening

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await super().serve(sockets or [self.sock])

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_listening:
            self.on_listening()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn re-raises the signal after shutting down (killing the process); here a signal just stops serving
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.handle_exit, signum, None)
        try:
            yield
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
