"""`--connect URL` and `--token`: how the CLI reaches a running `warpcode serve` over ACP's WebSocket, shared by `chat`
and `sessions`. The token is the one given, else $WARPCODE_TOKEN, else the file `serve` wrote with these settings;
a refused token is one line saying where it came from and where the server keeps its own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

from warpcode.agent.cli.serve import TOKEN_VARIABLE, default_token_file


def add_connect_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connect", metavar="URL", help="a running `warpcode serve`, e.g. ws://127.0.0.1:8765/acp")
    parser.add_argument(
        "--token",
        help=f"bearer token for --connect (default: ${TOKEN_VARIABLE}, else the token file `warpcode serve` wrote); "
        f"given here it shows in `ps` to every user: prefer ${TOKEN_VARIABLE}",
    )


@contextlib.asynccontextmanager
async def over_websocket(args: argparse.Namespace, client: Any) -> AsyncIterator[Any]:
    """The SDK's client connection to `args.connect`, for `client` (the SDK's Client), closed on the way out."""
    import acp
    import websockets
    from acp.ws import create_websocket_stream

    token_file = _token_file(args.state_dir)
    if args.token:
        token, source = args.token, "given with --token"
    elif os.environ.get(TOKEN_VARIABLE):
        token, source = os.environ[TOKEN_VARIABLE], f"from ${TOKEN_VARIABLE}"
    else:
        token, source = _saved_token(token_file), f"read from {token_file}"
    try:
        transport = await create_websocket_stream(args.connect, headers={"Authorization": f"Bearer {token}"})
    except websockets.InvalidStatus as error:
        if error.response.status_code != HTTPStatus.UNAUTHORIZED:
            raise ConnectionError(f"could not connect to {args.connect}: {error}") from error
        raise ConnectionError(
            f"{args.connect} refused the token {source} (HTTP 401): pass the server's token with --token or "
            f"${TOKEN_VARIABLE}; `warpcode serve` says where it keeps it when it starts (by default {token_file}, "
            "on its machine)"
        ) from None
    except (OSError, websockets.InvalidHandshake, websockets.InvalidURI) as error:
        raise ConnectionError(f"could not connect to {args.connect}: {error}") from error
    conn = acp.connect_to_agent(client, transport)
    try:
        yield conn
    finally:
        await conn.close()


def _token_file(state_dir: Path | None) -> Path:
    """Where `warpcode serve` keeps its token when it runs here with the same settings."""
    from warpcode.agent.config import load_settings
    from warpcode.tools.workspace import default_state_home

    return default_token_file(load_settings().token_file, state_dir or default_state_home())


def _saved_token(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"no --token given and no token file {path} (`warpcode serve` writes it)") from None
