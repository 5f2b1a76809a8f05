"""User configuration: `--model`, else WARPCODE_MODEL, else ~/.config/warpcode/config.toml.

config.toml keys (all optional): model, mode, host, port, token_file, max_turn_requests, tool_output_tokens,
max_tokens (the most tokens the model may write in one answer; default: the backend's, 4,096), sandbox ("none"
or "bwrap": where run_command and run_tests run, tools/sandbox.py), sandbox_network (true or false, the default:
whether commands in the sandbox may use the network), models (a list of backend specs the ACP service offers in
its model picker, besides `model`, which stays the default: `models = ["openai:http://host:8000/v1#qwen3-coder",
"local:/models/small"]`), and `[mcp_servers.NAME]` tables: the MCP servers every session connects to
(agent/mcp/specs.py: command, args, env or url, headers; startup_timeout_s, tool_timeout_s).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warpcode.agent.mcp.specs import McpServerSpec, from_config
from warpcode.agent.permissions import MODES
from warpcode.tools.sandbox import SETTINGS as SANDBOXES


class ConfigError(ValueError):
    """The config file exists but is not valid: named with the file, so the user can fix it."""


@dataclass
class Settings:
    model: str | None = None
    mode: str = "ask"
    host: str = "127.0.0.1"
    port: int = 8765
    token_file: str | None = None
    max_turn_requests: int = 50
    tool_output_tokens: int = 6_000
    max_tokens: int | None = None  # one answer's token limit; None: the backend's own (4,096)
    sandbox: str = "none"
    sandbox_network: bool = False
    models: list[str] = field(default_factory=list)  # more models the ACP service offers (session config options)
    mcp_servers: tuple[McpServerSpec, ...] = ()


def config_path(env: Mapping[str, str] = os.environ) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".config")
    return Path(base) / "warpcode" / "config.toml"


def load_settings(
    model: str | None = None,
    env: Mapping[str, str] = os.environ,
    path: Path | None = None,
    *,
    max_tokens: int | None = None,
) -> Settings:
    """The settings, with the command line's `model` (else WARPCODE_MODEL) and `max_tokens` over the file's."""
    path = path or config_path(env)
    values = _read(path)
    settings = Settings(**values)
    settings.model = model or env.get("WARPCODE_MODEL") or settings.model
    settings.max_tokens = max_tokens or settings.max_tokens
    return settings


def _read(path: Path) -> dict[str, Any]:
    try:
        values = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    if "mcp_servers" in values:
        try:
            values["mcp_servers"] = from_config(values["mcp_servers"])
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    types = Settings.__annotations__
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r}; known: {', '.join(types)}")
    kinds = {"int": (int, "an integer"), "int | None": (int, "an integer"), "bool": (bool, "true or false")}
    for key, value in values.items():
        if types[key] == "list[str]":
            if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
                raise ConfigError(f'{path}: {key} must be a list of model specs, e.g. ["openai:http://host/v1#name"]')
            continue
        if key == "mcp_servers":
            continue
        expected, kind = kinds.get(types[key], (str, "a string"))
        if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
            raise ConfigError(f"{path}: {key} must be {kind}")
    if values.get("max_tokens", 1) < 1:
        raise ConfigError(f"{path}: max_tokens must be at least 1")
    if values.get("mode", "ask") not in MODES:
        raise ConfigError(f"{path}: mode must be one of {', '.join(MODES)}")
    if values.get("sandbox", "none") not in SANDBOXES:
        raise ConfigError(f"{path}: sandbox must be one of {', '.join(SANDBOXES)}")
    return values
