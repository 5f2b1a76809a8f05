"""Permission policy: which tool calls run without asking, per session mode (docs/architecture.md).

A policy is an async callable `(tool_name, kind, arguments) -> "allow" | "reject"`. `mode_policy` builds the
standard one: reads, searches and plan updates never ask; `ask` asks before edits, commands and tests,
`accept-edits` only before commands and tests, `auto` never. Asking is delegated to `ask` (the ACP service sends
session/request_permission, the terminal prompts); with no one to ask, the call is rejected.

An "always" answer covers the call's `GrantScope`, as Claude Code scopes them: its tool (each edit tool on its
own, run_tests alone); for run_command, the commands starting with the same program and subcommand for the usual
multi-command programs (`git status` covers `git status --short`, not `git log`; a `run` or `exec` subcommand
takes the script it runs too: `npm run build`), else with the same program. A command with shell control
characters (; & | ` $( ( ) < > newlines), or one whose program runs code given in its arguments (shells,
interpreters, env, sudo, xargs...), covers only itself, exactly.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from warpcode.agent.mcp.naming import display_name
from warpcode.agent.toolbox import TOOL_KINDS

Decision = Literal["allow", "reject"]
PermissionPolicy = Callable[[str, str, dict[str, Any]], Awaitable[Decision]]

MODES = ("ask", "accept-edits", "auto")
SILENT_KINDS = {"read", "search", "think"}  # never ask, in any mode
SHELL_CONTROL = re.compile(r"[;&|`<>()\n\r]|\$\(")
# fmt: off
MULTI_COMMAND_PROGRAMS = frozenset({
    "git", "gh", "npm", "npx", "pnpm", "yarn", "bun", "deno", "cargo", "rustup", "go", "docker", "podman", "kubectl",
    "helm", "terraform", "pip", "pip3", "uv", "poetry", "pdm", "hatch", "conda", "make", "cmake", "apt", "apt-get",
    "brew", "dotnet", "mvn", "gradle", "bundle", "systemctl",
})
RUNNER_SUBCOMMANDS = frozenset({"run", "exec", "x", "dlx"})  # `npm run build`: the script is part of the prefix
RUNS_GIVEN_CODE = frozenset({  # and every python*
    "sh", "bash", "zsh", "dash", "ksh", "fish", "env", "sudo", "doas", "su", "xargs", "nohup", "nice", "time",
    "timeout", "exec", "eval", "command", "builtin", "source", ".", "watch", "node", "perl", "ruby", "php",
})
# fmt: on
LABEL_COMMAND_CHARS = 60


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


@dataclass(frozen=True)
class GrantScope:
    """What an "always" answer covers: the calls of `tool`; for run_command, the commands starting with the words
    `prefix`, or only the exact `command`."""

    tool: str
    prefix: tuple[str, ...] = ()
    command: str | None = None

    def label(self) -> str:
        """What the scope covers, in the user's words: "edits with write_file", "`git status …` commands"."""
        if self.command is not None:
            shown = " ".join(self.command.split())
            if len(shown) > LABEL_COMMAND_CHARS:
                shown = shown[: LABEL_COMMAND_CHARS - 1] + "…"
            return f"exactly the command `{shown}`"
        if self.prefix:
            return f"`{shlex.join(self.prefix)} …` commands"
        if mcp_tool := display_name(self.tool):
            return f"the MCP tool {mcp_tool}"
        return f"edits with {self.tool}" if TOOL_KINDS.get(self.tool) == "edit" else self.tool

    def record(self) -> dict[str, Any]:
        """The scope as JSON, for the session log."""
        if self.command is not None:
            return {"tool": self.tool, "command": self.command}
        return {"tool": self.tool, "prefix": list(self.prefix)} if self.prefix else {"tool": self.tool}

    @classmethod
    def from_record(cls, record: Any) -> GrantScope | None:
        """The scope of a log record, None for anything else (such as the tool-kind grants of older versions)."""
        if not isinstance(record, dict) or not isinstance(record.get("tool"), str):
            return None
        prefix, command = record.get("prefix", []), record.get("command")
        if not isinstance(prefix, list) or not all(isinstance(w, str) for w in prefix):
            return None
        return cls(record["tool"], tuple(prefix), command if isinstance(command, str) else None)


def grant_scope(tool_name: str, arguments: dict[str, Any]) -> GrantScope:
    """The scope an "always" answer to this call covers (see the module docstring)."""
    if tool_name != "run_command":
        return GrantScope(tool_name)
    command = str(arguments.get("command", ""))
    prefix = command_prefix(command)
    return GrantScope(tool_name, prefix=prefix) if prefix else GrantScope(tool_name, command=command)


def command_prefix(command: str) -> tuple[str, ...] | None:
    """The words that commands covered by a grant for `command` start with; None: only `command` itself."""
    if SHELL_CONTROL.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes
        return None
    if not words or "=" in words[0] or _runs_given_code(words[0]):
        return None
    if os.path.basename(words[0]) not in MULTI_COMMAND_PROGRAMS:
        return (words[0],)
    length = 3 if len(words) > 1 and words[1] in RUNNER_SUBCOMMANDS else 2
    prefix = tuple(words[:length])
    if len(prefix) < length or any(w.startswith("-") or _runs_given_code(w) for w in prefix[1:]):
        return None  # `git -C dir ...`, a bare `git`: no subcommand to scope to
    return prefix


def _runs_given_code(word: str) -> bool:
    program = os.path.basename(word)
    return program in RUNS_GIVEN_CODE or program.startswith("python")  # python3.12 too
