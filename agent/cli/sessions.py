"""`warpcode sessions [list | show ID | delete ID]`: the sessions stored in the state directory (one JSONL log
each, service/session_store.py), the same ones `warpcode chat --resume ID` and an editor's session list continue;
with --connect, those of a running `warpcode serve`, through ACP (remote_sessions.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import datetime
from pathlib import Path

from warpcode.agent.cli.ws_connect import add_connect_options


def register(commands: argparse._SubParsersAction) -> None:
    sessions = commands.add_parser(
        "sessions",
        help="list, show or delete the stored sessions (`warpcode chat --resume ID` continues one)",
        description="The sessions kept in the state directory, newest first: list (the default: id, workspace, "
        "last activity, turns, first prompt), show ID (the whole conversation, as chat replays it), delete ID "
        "(its log; the workspace's checkpoints stay). `warpcode chat --resume ID` continues one. With --connect, the "
        "sessions of that `warpcode serve` (ACP session/list, session/load, session/delete).",
    )
    sessions.add_argument("action", nargs="?", choices=("list", "show", "delete"), default="list")
    sessions.add_argument("session_id", nargs="?", metavar="ID", help="the session, for show and delete")
    sessions.add_argument("--cwd", help="list only the sessions of this workspace directory")
    sessions.add_argument(
        "--state-dir",
        type=Path,
        help="where the sessions are kept (default: $WARPCODE_STATE_DIR, else $XDG_STATE_HOME/warpcode, else "
        "~/.local/state/warpcode)",
    )
    add_connect_options(sessions)
    sessions.set_defaults(handler=run_sessions)


def run_sessions(args: argparse.Namespace) -> int:
    from warpcode.agent.service.session_store import SessionStore, UnknownSession
    from warpcode.tools.state_home import default_state_home

    if args.action == "list" and args.session_id:
        raise ValueError(f"`sessions list` takes no id (got {args.session_id!r}): `sessions show ID` shows one")
    if args.action != "list" and not args.session_id:
        raise ValueError(f"`sessions {args.action}` needs a session id: `warpcode sessions` lists them")
    if args.connect:
        from warpcode.agent.cli.remote_sessions import run_remote

        return asyncio.run(run_remote(args))
    store = SessionStore((args.state_dir or default_state_home()).expanduser().absolute())
    if args.action == "list":
        return _list(store, args.cwd)
    try:
        if args.action == "show":
            _show(store, args.session_id)
        else:
            store.delete(args.session_id)
            print(f"deleted session {args.session_id}")
    except UnknownSession:
        raise ValueError(
            f"there is no stored session {args.session_id!r} in {store.directory}: `warpcode sessions` lists them"
        ) from None
    return 0


def _list(store, cwd: str | None) -> int:
    from rich.console import Console
    from rich.table import Table

    from warpcode.agent.tables import print_table

    found, _ = store.page(os.path.abspath(cwd) if cwd else None, None, limit=sys.maxsize)
    console = Console(highlight=False)
    if not found:
        where = f" for {os.path.abspath(cwd)}" if cwd else ""
        console.print(f"no stored sessions{where} in {store.directory}", markup=False)
        return 0
    table = Table()
    for column in ("id", "workspace", "last activity", "turns", "first prompt"):
        table.add_column(column, justify="right" if column == "turns" else "left")
    for summary in found:
        changed = datetime.fromtimestamp(summary.changed).astimezone().strftime("%Y-%m-%d %H:%M")
        turns = str(store.turns(summary.session_id))
        table.add_row(summary.session_id, summary.cwd, changed, turns, summary.title or "-")
    print_table(console, table)
    return 0


def _show(store, session_id: str) -> None:
    from warpcode.agent.cli.terminal_view import TerminalView
    from warpcode.agent.plural import counted
    from warpcode.agent.service.session import history_updates

    saved = store.load(session_id)
    view = TerminalView()
    turns = counted(store.turns(session_id), "turn")
    view.console.print(
        f"session {session_id} in {saved.cwd}, created {saved.created}, mode {saved.mode}, {turns}",
        markup=False,
        style="cyan",
        soft_wrap=True,
    )
    for update in history_updates(session_id, saved.history):
        view(update)
    view.finish()
