"""`warpcode acp`: the ACP agent over stdio, for editors that launch the agent as a subprocess.

stdout carries JSON-RPC only: logs go to stderr, and tools capture their commands' output.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from warpcode.agent.cli.options import add_agent_options


def register(commands: argparse._SubParsersAction) -> None:
    acp = commands.add_parser(
        "acp",
        help="serve the Agent Client Protocol over stdio",
        description="Serve ACP v1 (JSON-RPC on stdin/stdout) for an editor that launched warpcode. Sessions persist "
        "in --state-dir and can be reopened with session/load after a restart.",
    )
    add_agent_options(acp)
    acp.set_defaults(handler=serve_stdio)


def serve_stdio(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="warpcode acp: %(levelname)s %(message)s")
    asyncio.run(_serve(args))
    return 0


async def _serve(args: argparse.Namespace) -> None:
    from warpcode.agent.cli.options import agent_service_config
    from warpcode.agent.service.agent import AcpService
    from warpcode.agent.service.stdio import serve_stdio

    _, config = agent_service_config(args)
    if config.model is None:
        logging.warning("no model configured: prompts will answer with how to configure one")
    agent = AcpService(config).new_connection_agent()
    try:
        await serve_stdio(agent)
    finally:
        await agent.close()
