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
from pathlib import Path

from warpcode.agent.cli.config import add_agent_options

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


def nobody_to_ask(refused: list[str], yes: bool = False):
    """The permission question of a headless turn: nobody can answer, so the call is rejected (and named in
    `refused`), or allowed when `yes`."""
    from warpcode.agent import events

    async def answer(tool_name: str, kind: str, arguments: dict) -> str:
        if yes:
            return "allow"
        refused.append(events.tool_title(tool_name, arguments))
        return "reject"

    return answer


def headless_agent(
    cwd: str,
    settings,
    mode: str,
    emit,
    ask,
    *,
    max_turn_requests: int | None = None,
    sandbox: str | None = None,
    sandbox_network: bool | None = None,
    state_dir: Path | None = None,
):
    """The agent of a headless turn (`warpcode run`, each job of `warpcode batch`): the settings' model and limits,
    `mode`'s permission policy with `ask` for the calls that would ask, its state under `state_dir` (default: the
    state home), its commands in `sandbox` (default: the settings')."""
    from warpcode.agent.backends import backend_from_spec
    from warpcode.agent.loop import Agent, Limits
    from warpcode.agent.permissions import mode_policy
    from warpcode.tools import Workspace
    from warpcode.tools.sandbox import sandbox_from_setting
    from warpcode.tools.workspace import default_state_home, ensure_private_dir, workspace_state_dir

    limits = Limits(
        max_turn_requests or settings.max_turn_requests,
        settings.tool_output_tokens,
        settings.max_tokens or Limits.answer_reserve_tokens,  # the context keeps room for the longest answer
    )
    home = ensure_private_dir((state_dir or default_state_home()).expanduser().resolve())
    network = settings.sandbox_network if sandbox_network is None else sandbox_network
    return Agent(
        Workspace(cwd, workspace_state_dir(home, cwd)),
        backend_from_spec(settings.model, settings.max_tokens),
        emit,
        mode,
        mode_policy(mode, ask),
        limits,
        sandbox_from_setting(sandbox or settings.sandbox, network, (home,)),
    )


async def _run(args: argparse.Namespace) -> int:
    from warpcode.agent import events
    from warpcode.agent.cli.config import checked_cwd, load_settings
    from warpcode.agent.cli.terminal_view import TerminalView

    cwd = checked_cwd(args.cwd)
    settings = load_settings(args.model, max_tokens=args.max_tokens)
    mode = args.mode or settings.mode
    refused: list[str] = []
    if args.json:
        view = None
        emit = lambda update: print(events.to_json(update), flush=True)
    else:
        view = emit = TerminalView()
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
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, agent.cancel)
    try:
        result = await agent.prompt(args.instruction)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if args.json:
        print(json.dumps({"stopReason": result.stop_reason, **({"refused": refused} if refused else {})}), flush=True)
    else:
        view.finish()
        if result.error:  # the agent's answer above already says why, in full
            print("stopped: the model could not answer (the reason is above)", file=sys.stderr)
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
