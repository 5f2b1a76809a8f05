"""Where warpcode keeps its state (sessions, each workspace's checkpoints and caches, serve's token file).

Standard library only: the sandbox (tools/sandbox.py) hides this folder from commands, and must load where
warpcode's other dependencies may not be installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

STATE_HOME_VARIABLE = "WARPCODE_STATE_DIR"


def default_state_home(env: Mapping[str, str] = os.environ) -> Path:
    """$WARPCODE_STATE_DIR, else $XDG_STATE_HOME/warpcode, else ~/.local/state/warpcode.

    A relative XDG_STATE_HOME is ignored, as the XDG spec says: it would put the state wherever the process runs,
    a repository included.
    """
    if env.get(STATE_HOME_VARIABLE):
        return Path(env[STATE_HOME_VARIABLE]).expanduser()
    xdg = env.get("XDG_STATE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / "warpcode"
