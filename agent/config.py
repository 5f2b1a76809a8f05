"""User configuration: `--model`, else WARPCODE_MODEL, else ~/.config/warpcode/config.toml.

config.toml keys (all optional): model, mode, host, port, token_file, max_turn_requests, tool_output_tokens,
max_tokens (the most tokens the model may write in one answer; default: the backend's, 4,096), sandbox ("none"
or "bwrap": where run_command and run_tests run, tools/sandbox.py), sandbox_network (true or false, the default:
whether commands in the sandbox may use the network).
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    types = Settings.__annotations__
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r}; known: {', '.join(types)}")
    kinds = {"int": (int, "an integer"), "int | None": (int, "an integer"), "bool": (bool, "true or false")}
    for key, value in values.items():
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


def checked_cwd(cwd: str | None, option: str = "--cwd") -> str | None:
    """The absolute form of a workspace directory the user named, or a one-line error in the command's words."""
    if cwd is None:
        return None
    if not os.path.isdir(cwd):
        raise ValueError(f"{option} {cwd!r} is not a directory: give the folder of the repository to work in")
    return os.path.abspath(cwd)


def agent_service_config(args: argparse.Namespace) -> tuple[Settings, Any]:
    """The settings, and the ACP service's configuration from them and the agent options (add_agent_options)."""
    from warpcode.agent.service.agent import ServiceConfig

    settings = load_settings(args.model, max_tokens=args.max_tokens)
    config = ServiceConfig.from_settings(settings, args.state_dir, args.mode, args.sandbox, args.sandbox_network)
    return settings, config


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    """The options every agent command shares (run, acp, serve, chat), with one wording and one set of defaults."""
    parser.add_argument(
        "--model", help="openai:URL[#MODEL], local:DIR or scripted:PATH (default: WARPCODE_MODEL, config)"
    )
    parser.add_argument("--mode", choices=MODES, help="permission mode (default: the config's, else ask)")
    parser.add_argument(
        "--max-tokens",
        type=_positive,
        metavar="N",
        help="the most tokens the model may write in one answer (default: the config's max_tokens, else 4096); "
        "an answer cut there ends the turn with stop reason max_tokens",
    )
    parser.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        help="where commands and tests run: none (as you, default) or bwrap (bubblewrap: writes only in the "
        "workspace, no privileges, warpcode's state and your secrets hidden, offline)",
    )
    parser.add_argument(
        "--sandbox-network",
        action=argparse.BooleanOptionalAction,
        help="let commands in the sandbox use the network, loopback included (default: the config's, else off)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="where sessions, each workspace's checkpoints and caches, and serve's token file are kept, private "
        "to you (default: $WARPCODE_STATE_DIR, else $XDG_STATE_HOME/warpcode, else ~/.local/state/warpcode)",
    )


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of tokens, at least 1 (got {text!r})")
    return int(text)
