"""The scripted model's script file: the turns `--model scripted:PATH` plays back, one per model request."""

from __future__ import annotations

import json
from pathlib import Path


def write_script(path: Path, turns: list[dict]) -> Path:
    path.write_text(json.dumps({"turns": turns}))
    return path
