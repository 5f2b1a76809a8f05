"""The names MCP tools have for the model: `mcp__<server>__<tool>`, as Claude Code names them.

The prefix keeps them apart from our own tools (none starts with `mcp__`), and the server part from each other.
Model APIs take function names of at most 64 characters from [A-Za-z0-9_-] (OpenAI's rule, which the others
share), so other characters become `_`, and a name that is still too long is cut and ends with a hash of the
whole, which keeps two long names apart. Runs of `_` in the server part become one, so the first `__` after the
prefix always ends the server's name (what `display_name` reads back).
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME_CHARS = 64
_HASH_CHARS = 8
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The model's name for `tool` of `server`: unique per (server, tool), never one of our tools' names."""
    server_part = re.sub(r"_+", "_", _NOT_ALLOWED.sub("_", server)).strip("_") or "server"
    name = f"{PREFIX}{server_part}__{_NOT_ALLOWED.sub('_', tool) or 'tool'}"
    if len(name) <= MAX_NAME_CHARS and name == f"{PREFIX}{server}__{tool}":
        return name
    # Changed or cut: the hash of the real names keeps `a.b` and `a_b` (and two cut names) apart.
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_CHARS]
    return f"{name[: MAX_NAME_CHARS - _HASH_CHARS - 1]}_{digest}"


def is_mcp_name(name: str) -> bool:
    return name.startswith(PREFIX)


def display_name(name: str) -> str | None:
    """`server: tool` for a tool call's title, from the model's name; None for a name that is not an MCP tool's."""
    if not is_mcp_name(name) or "__" not in name[len(PREFIX) :]:
        return None
    server, tool = name[len(PREFIX) :].split("__", 1)
    return f"{server}: {tool}"
