"""Permission policy: which tool calls run without asking, per session mode (design.md section 3).

A policy is an async callable `(tool_name, kind, arguments) -> "allow" | "reject"`. `mode_policy` builds the
standard one: reads, searches and plan updates never ask; `ask` asks before edits, commands and tests,
`accept-edits` only before commands and tests, `auto` never. Asking is delegated to `ask` (the ACP service sends
session/request_permission, the terminal prompts); with no one to ask, the call is rejected.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

Decision = Literal["allow", "reject"]
PermissionPolicy = Callable[[str, str, dict[str, Any]], Awaitable[Decision]]

MODES = ("ask", "accept-edits", "auto")
SILENT_KINDS = {"read", "search", "think"}  # never ask, in any mode


def needs_permission(mode: str, kind: str) -> bool:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    if kind in SILENT_KINDS or mode == "auto":
        return False
    return not (mode == "accept-edits" and kind == "edit")


def mode_policy(mode: str, ask: PermissionPolicy | None = None) -> PermissionPolicy:
    needs_permission(mode, "read")  # reject an unknown mode now, not at the first tool call

    async def policy(tool_name: str, kind: str, arguments: dict[str, Any]) -> Decision:
        if not needs_permission(mode, kind):
            return "allow"
        return await ask(tool_name, kind, arguments) if ask else "reject"

    return policy


def rejection_message(tool_name: str, kind: str, mode: str) -> str:
    return (
        f"Permission denied: {tool_name} ({kind}) was not allowed in mode '{mode}'. Do not retry it; explain to "
        f"the user what you wanted to do and why, or continue with the tools that are allowed."
    )
