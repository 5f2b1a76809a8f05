"""`warpcode run`: one headless prompt turn in a directory, shown as it happens (or as ACP JSON lines).

Permissions: nobody can be asked during a headless run, so in mode `ask` (and for commands in `accept-edits`)
calls that would ask are rejected and the model is told so, unless `--yes` answers yes to every question. A turn
with refused calls ends with a line naming them and how to allow them, and exit code EXIT_REFUSED.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from warpcode.agent.cli.options import add_agent_options

EXIT_CODES = {"end_turn": 0, "cancelled": 130}
EXIT_REFUSED = 3  # the turn ended, but calls that needed a permission nobody could give were refused


def register(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser(
        "run",
        help="run one headless agent turn on a directory",
        description="Run one prompt turn of the agent in --cwd and print its progress. Exit code 0 when the model "
        f"ends its turn, 1 on a limit or error, {EXIT_REFUSED} when it ended with tool calls refused for want of a "
        "permission (mode ask or accept-edits without --yes), 130 when cancelled (Ctrl-C).",
    )
    run.add_argument("instruction", help="what the agent should do")
    run.add_argument("--cwd", default=".", help="the workspace directory (default: the current directory)")
    add_agent_options(run)
    run.add_argument("--yes", action="store_true", help="answer yes to every permission question")
    run.add_argument("--json", action="store_true", help="print each ACP session/update as one JSON line")
    run.add_argument("--max-turn-requests", type=int, metavar="N", help="most model requests in the turn")
    run.set_defaults(handler=run_turn)


def run_turn(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from warpcode.agent import events
    from warpcode.agent.cli.options import checked_cwd
    from warpcode.agent.cli.terminal_view import TerminalView
    from warpcode.agent.config import load_settings
    from warpcode.agent.headless import headless_agent, nobody_to_ask
    from warpcode.agent.mcp.session_tools import McpTools

    cwd = checked_cwd(args.cwd)
    settings = load_settings(args.model, max_tokens=args.max_tokens)
    mode = args.mode or settings.mode
    refused: list[str] = []
    if args.json:
        view = None
        emit = lambda update: print(events.to_json(update), flush=True)
    else:
        view = emit = TerminalView()
    mcp = McpTools(settings.mcp_servers, cwd) if settings.mcp_servers else None  # the config file's MCP servers
    try:
        agent = headless_agent(
            cwd,
            settings,
            mode,
            emit,
            nobody_to_ask(refused, args.yes),
            max_turn_requests=args.max_turn_requests,
            sandbox=args.sandbox,
            sandbox_network=args.sandbox_network,
            state_dir=args.state_dir,
            mcp=mcp,
        )
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, agent.cancel)
        try:
            result = await agent.prompt(args.instruction)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    finally:
        if mcp is not None:  # its servers stop with the run
            await mcp.close()
    failure = result.failure  # reported here once: the updates above never carry it
    if args.json:
        ended = {"stopReason": result.stop_reason, **({"error": failure.message} if failure else {})}
        print(json.dumps({**ended, **({"refused": refused} if refused else {})}), flush=True)
    else:
        view.finish()
        if failure is not None:
            print(failure.message, file=sys.stderr)
        elif result.stop_reason != "end_turn":
            print(f"stopped: {result.stop_reason}", file=sys.stderr)
    if refused:
        print(_refusal_note(refused, mode), file=sys.stderr)
        if result.stop_reason == "end_turn":
            return EXIT_REFUSED
    return EXIT_CODES.get(result.stop_reason, 1)


def _refusal_note(refused: list[str], mode: str) -> str:
    calls = ", ".join(dict.fromkeys(refused))  # each call once, in order
    wider = "--mode auto" if mode == "accept-edits" else "--mode accept-edits (edits only) or --mode auto"
    return (
        f"refused {len(refused)} tool call{'s' if len(refused) != 1 else ''} that needed a permission nobody could "
        f"give in mode {mode}: {calls}. Allow them with --yes, or with {wider}."
    )
