"""`warpcode sessions --connect URL`: the sessions a running `warpcode serve` keeps, through ACP, so they can be
managed from another machine: list (session/list, page by page), show ID (session/load, whose replay is drawn as
chat draws it, then session/close where the server offers it), delete ID (session/delete, ACP 1.21). Each step
first checks that the server advertises the method, and says so in one line when it does not.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime
from typing import Any

import acp
from acp import schema

from warpcode.agent.cli.terminal_view import TerminalView
from warpcode.agent.cli.ws_connect import over_websocket


class _Replay:
    """The SDK's Client for a connection that only reads: a loaded session's history drawn on the terminal."""

    def __init__(self) -> None:
        self.view = TerminalView()

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.view(update)

    async def request_permission(self, options: list, session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))


async def run_remote(args: argparse.Namespace) -> int:
    replay = _Replay()
    async with over_websocket(args, replay) as conn:
        agent = (await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)).agent_capabilities
        offered = agent.session_capabilities if agent else None
        if not (offered and offered.list):
            raise ValueError(f"{args.connect} does not list its sessions (no ACP session/list)")
        cwd = os.path.abspath(args.cwd) if args.cwd else None
        stored = await _stored(conn, cwd)
        if args.action == "list":
            _print(replay.view, stored, args.connect, cwd)
            return 0
        found = next((s for s in stored if s.session_id == args.session_id), None)
        if found is None:
            raise ValueError(f"{args.connect} has no stored session {args.session_id!r}: `warpcode sessions "
                             f"--connect {args.connect}` lists them")  # fmt: skip
        if args.action == "show":
            await _show(conn, replay.view, found, bool(offered.close))
        elif not offered.delete:
            raise ValueError(f"{args.connect} cannot delete sessions (no ACP session/delete): run `warpcode sessions "
                             f"delete {found.session_id}` on its machine")  # fmt: skip
        else:
            # The SDK (0.12, ACP schema 1.19) predates session/delete: the request goes out on its JSON-RPC link.
            await conn._conn.send_request("session/delete", {"sessionId": found.session_id})
            print(f"deleted session {found.session_id}")
    return 0


async def _stored(conn: Any, cwd: str | None) -> list[schema.SessionInfo]:
    found, cursor = [], None
    while True:
        page = await conn.list_sessions(cwd=cwd, cursor=cursor)
        found += page.sessions
        if not (cursor := page.next_cursor):
            return found


def _print(view: TerminalView, stored: list[schema.SessionInfo], url: str, cwd: str | None) -> None:
    from rich.table import Table

    from warpcode.agent.tables import print_table

    if not stored:
        view.console.print(f"no stored sessions{f' for {cwd}' if cwd else ''} on {url}", markup=False)
        return
    table = Table()
    for column in ("id", "workspace", "last activity", "title"):
        table.add_column(column)
    for info in stored:
        changed = _local_time(info.updated_at) if info.updated_at else "-"
        table.add_row(info.session_id, info.cwd, changed, info.title or "-")
    print_table(view.console, table)


def _local_time(iso: str) -> str:
    return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")


async def _show(conn: Any, view: TerminalView, info: schema.SessionInfo, closable: bool) -> None:
    view.console.print(f"session {info.session_id} in {info.cwd}", markup=False, style="cyan", soft_wrap=True)
    await conn.load_session(cwd=info.cwd, session_id=info.session_id)  # the history arrives as session updates
    view.finish()
    if closable:  # the load opened it on the server: let it go now rather than when the connection ends
        await conn.close_session(session_id=info.session_id)
