"""`warpcode serve`: the ACP agent service over WebSocket at ws://HOST:PORT/acp (the main job)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import secrets
import signal
import sys
from pathlib import Path

from warpcode.agent.cli.options import add_agent_options
from warpcode.agent.service.listening import LISTENING
from warpcode.tools.workspace import ensure_private_dir

TOKEN_FILE_NAME = "serve-token"
TOKEN_VARIABLE = "WARPCODE_TOKEN"  # the token without putting it on a command line, which `ps` shows everyone


def default_token_file(configured: str | None, state_dir: Path) -> Path:
    """Where `serve` keeps its generated token: the config's token_file, else beside the sessions."""
    return Path(configured) if configured else state_dir / TOKEN_FILE_NAME


def register(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve ACP over WebSocket (editors connect to ws://HOST:PORT/acp)",
        description="Serve the agent to editors over the Agent Client Protocol on a WebSocket at /acp. Clients "
        "send `Authorization: Bearer TOKEN` on the upgrade request; browser pages are refused unless their Origin "
        "is allowed.",
    )
    add_agent_options(serve)
    serve.add_argument("--host", help="address to bind (default: the config's, else 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: the config's, else 8765; 0 picks a free one)")
    serve.add_argument(
        "--token",
        help=f"bearer token clients must send (default: ${TOKEN_VARIABLE}, else the token file's, created if need be); "
        f"given here it shows in `ps` to every user: prefer ${TOKEN_VARIABLE} or --token-file",
    )
    serve.add_argument("--token-file", type=Path, help="where the token is read from, or generated into (mode 0600)")
    serve.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN", help="a browser Origin to accept (repeatable)"
    )
    serve.add_argument("--max-frame-mb", type=float, default=16.0, help="largest incoming frame (default: 16)")
    serve.set_defaults(handler=run_server)


def run_server(args: argparse.Namespace) -> int:
    # Warnings only: what the operator must hear of (commands left by a crashed run, clients that went away).
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="warpcode serve: %(levelname)s %(message)s")
    return asyncio.run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    from warpcode.agent.cli.options import agent_service_config
    from warpcode.agent.service.agent import AcpService
    from warpcode.agent.service.ws_server import ACP_PATH, AcpWebSocketServer, Guard, ServerLimits

    settings, config = agent_service_config(args)
    token_file = args.token_file or default_token_file(settings.token_file, config.state_dir)
    config.secrets = (token_file,)  # sandboxed commands must not read it, wherever it is kept
    given = args.token or os.environ.get(TOKEN_VARIABLE)
    token = given or read_or_create_token(token_file)
    guard = Guard(token, frozenset(args.allow_origin))
    server = AcpWebSocketServer(AcpService(config), guard, ServerLimits(max_frame_bytes=int(args.max_frame_mb * 2**20)))
    host, port = args.host or settings.host, settings.port if args.port is None else args.port
    try:
        host, port = await server.start(host, port)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise OSError(
            f"port {port} on {host} is already in use (another warpcode serve?): pick another with --port N, "
            f"or --port 0 for any free one (the line above the token says which)"
        ) from None
    token_note = f"the token given with --token or ${TOKEN_VARIABLE}" if given else f"token in {token_file}"
    model_note = config.model or "none configured (prompts will say how to set one)"
    print(f"{LISTENING} ws://{host}:{port}{ACP_PATH} ({token_note}; model: {model_note})", file=sys.stderr)
    sys.stderr.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await server.serve_until_stopped(stop)
    return 0


def read_or_create_token(path: Path) -> str:
    """The token kept in `path`, created (0600, in a private directory) on first use; refused if others can read it."""
    if path.exists():
        if path.stat().st_mode & 0o077:
            raise PermissionError(f"{path} is readable by other users; run `chmod 600 {path}` or delete it")
        token = path.read_text().strip()
        if token:
            return token
    ensure_private_dir(path.parent)
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return token
