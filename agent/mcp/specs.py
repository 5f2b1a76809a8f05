"""Which MCP servers a session connects to: from the client's session/new, session/load or session/resume (ACP
`mcpServers`), and from the user's config file (`[mcp_servers.NAME]` tables, for every session).

A server is a command to run (stdio, which every ACP agent must support) or a URL (streamable HTTP). ACP's
deprecated SSE transport is not advertised (`mcpCapabilities.sse` stays false), so an SSE server a client sends
anyway becomes a `Skipped` entry, told to the user in the session rather than refusing the session.
When the client and the config file name the same server, the client's wins: the editor's setting is the more
specific one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

STARTUP_TIMEOUT_S = 30.0  # to start, initialize and list its tools
TOOL_TIMEOUT_S = 120.0  # one tool call (the default of run_command too)


@dataclass(frozen=True)
class McpServerSpec:
    """One MCP server: `command` + `args` + `env` (stdio) or `url` + `headers` (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    startup_timeout_s: float = STARTUP_TIMEOUT_S
    tool_timeout_s: float = TOOL_TIMEOUT_S

    @property
    def transport(self) -> str:
        return "http" if self.url is not None else "stdio"


@dataclass(frozen=True)
class Skipped:
    """A server the client sent that this agent cannot connect to, with why, for the session's first notice."""

    name: str
    reason: str


def from_acp(servers: Iterable[Any] | None) -> list[McpServerSpec | Skipped]:
    """The client's `mcpServers` (the SDK's McpServerStdio / HttpMcpServer / SseMcpServer models), in order."""
    specs: list[McpServerSpec | Skipped] = []
    for server in servers or ():
        kind = getattr(server, "type", None)
        if kind == "http":
            headers = tuple((h.name, h.value) for h in server.headers)
            specs.append(McpServerSpec(server.name, url=server.url, headers=headers))
        elif kind is None and hasattr(server, "command"):
            env = tuple((e.name, e.value) for e in server.env or ())
            specs.append(McpServerSpec(server.name, server.command, tuple(server.args), env))
        else:
            specs.append(Skipped(server.name, f"its transport ({kind}) is not supported: use stdio or http"))
    return specs


def from_config(table: Any) -> tuple[McpServerSpec, ...]:
    """The `[mcp_servers.NAME]` tables of config.toml; ValueError (naming the server and key) when one is wrong.

    [mcp_servers.github]
    command = "github-mcp-server"          # or url = "https://api.example.com/mcp"
    args = ["stdio"]
    env = { GITHUB_TOKEN = "..." }         # with url: headers = { Authorization = "Bearer ..." }
    startup_timeout_s = 30                 # optional: start + initialize + list tools
    tool_timeout_s = 120                   # optional: one tool call
    """
    if not isinstance(table, Mapping):
        raise ValueError("mcp_servers must be a table of servers: [mcp_servers.NAME]")
    return tuple(_config_server(name, values) for name, values in table.items())


CONFIG_KEYS = ("command", "args", "env", "url", "headers", "startup_timeout_s", "tool_timeout_s")


def _config_server(name: str, values: Any) -> McpServerSpec:
    where = f"mcp_servers.{name}"
    if not isinstance(values, Mapping):
        raise ValueError(f"{where} must be a table with command = ... or url = ...")
    unknown = sorted(set(values) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(CONFIG_KEYS)}")
    command, url = values.get("command"), values.get("url")
    if (command is None) == (url is None):
        raise ValueError(f"{where} needs exactly one of command (a stdio server) or url (a streamable HTTP server)")
    if not isinstance(command or url, str) or not (command or url):
        raise ValueError(f"{where}: {'command' if command is not None else 'url'} must be a non-empty string")
    args = values.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError(f"{where}: args must be a list of strings")
    if (url is None and "headers" in values) or (command is None and "env" in values):
        raise ValueError(f"{where}: env goes with command, headers with url")
    timeouts = {}
    for key in ("startup_timeout_s", "tool_timeout_s"):
        value = values.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ValueError(f"{where}: {key} must be a positive number of seconds")
        timeouts[key] = float(value)
    return McpServerSpec(
        name,
        command,
        tuple(args),
        _string_pairs(values.get("env", {}), f"{where}.env"),
        url,
        _string_pairs(values.get("headers", {}), f"{where}.headers"),
        **timeouts,
    )


def _string_pairs(table: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, Mapping) or not all(isinstance(v, str) for v in table.values()):
        raise ValueError(f'{where} must be a table of strings: {{ NAME = "value" }}')
    return tuple(table.items())


def session_servers(
    configured: Iterable[McpServerSpec], given: Iterable[McpServerSpec | Skipped]
) -> tuple[McpServerSpec | Skipped, ...]:
    """The config file's servers, then the client's; a client's server replaces a configured one of its name."""
    given = list(given)
    names = {spec.name for spec in given}
    return (*(spec for spec in configured if spec.name not in names), *given)
