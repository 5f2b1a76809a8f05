"""`warpcode chat`: an interactive terminal session with the agent, in-process or connected to `warpcode serve`.

Both ways are the same ACP client (`chat_client.Chat`); only the transport differs: in-process the agent of an
`AcpService` is served over the SDK's in-memory transport pair (as `serve` does per WebSocket connection), with
--connect the SDK's WebSocket client carries it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from typing import Any

from warpcode.agent.cli.options import add_agent_options, checked_cwd
from warpcode.agent.cli.ws_connect import add_connect_options, over_websocket


def register(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser(
        "chat",
        help="chat with the agent in the terminal (in-process, or --connect to `warpcode serve`)",
        description="An interactive session: each line is a prompt, the agent's work streams to the screen, "
        "permission questions are answered with y / n / a (always) / r (never). Ctrl-C cancels a running turn; "
        "Ctrl-C at the prompt, Ctrl-D or /quit leaves. /help lists the commands: chat's own (/undo, /checkpoints, "
        "/mode, /model) and the ones the agent offers (sent to it as the prompt).",
    )
    chat.add_argument("--cwd", help="the workspace directory (default: a resumed session's, else the current one)")
    add_agent_options(chat)
    chat.add_argument(
        "--resume",
        "--session",
        dest="session",
        metavar="ID",
        help="continue a stored session, replaying its history (`warpcode sessions` lists them; with --connect, "
        "one stored by that server)",
    )
    add_connect_options(chat)
    chat.set_defaults(handler=run_chat)


def run_chat(args: argparse.Namespace) -> int:
    return asyncio.run(_chat(args))


async def _chat(args: argparse.Namespace) -> int:
    from warpcode.agent.cli.chat_client import Chat, LineInput
    from warpcode.agent.cli.terminal_view import TerminalView

    cwd = checked_cwd(args.cwd)
    if args.connect and args.max_tokens:
        raise ValueError("--max-tokens sets the model of this process: with --connect, give it to `warpcode serve`")
    loop = asyncio.get_running_loop()
    chat = Chat(TerminalView(), LineInput(loop))
    connection = over_websocket(args, chat) if args.connect else _in_process(args, chat)
    async with connection:  # the SDK hands its connection to chat.on_connect
        loop.add_signal_handler(signal.SIGINT, chat.interrupt)
        try:
            await chat.run(cwd, args.session, args.mode)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    return 0


@contextlib.asynccontextmanager
async def _in_process(args: argparse.Namespace, client: Any) -> AsyncIterator[None]:
    import acp
    from acp._transport import memory_transport_pair  # the SDK's own pair, used by its HTTP server; not re-exported

    from warpcode.agent.cli.options import agent_service_config
    from warpcode.agent.service.agent import AcpService

    _, config = agent_service_config(args)
    agent = AcpService(config).new_connection_agent()
    agent_end, client_end = memory_transport_pair()
    server = asyncio.create_task(acp.run_agent(agent, agent_end))
    conn = acp.connect_to_agent(client, client_end)
    try:
        yield
    finally:
        await agent.close()  # cancels a running turn, killing its command
        await conn.close()
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
