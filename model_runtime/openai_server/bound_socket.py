"""serve-model's socket, bound before anything heavy is imported or loaded: a port in use is a one-line error at
once, not after the model has loaded (seconds for a tiny one, minutes for a large one). Nothing heavy is imported
here, so that the command can bind before it imports torch and the web framework."""

from __future__ import annotations

import errno
import socket


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on host:port (0: any free port)."""
    [(family, kind, proto, _, address), *_] = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait out TIME_WAIT
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRINUSE:
            raise
        raise OSError(
            f"port {port} on {host} is already in use (another model server?): pick another with --port N, or "
            f"--port 0 for any free one (the start-up line says which)"
        ) from None
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"
