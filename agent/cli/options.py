"""The options every agent command shares (run, acp, serve, chat), and what the commands make of them: the checked
workspace folder, the ACP service's configuration."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from warpcode.agent.config import Settings, load_settings
from warpcode.agent.permissions import MODES
from warpcode.tools.sandbox import SETTINGS as SANDBOXES


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
