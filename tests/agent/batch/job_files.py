"""A batch run's files: the jobs it reads (JSON lines, or any text to check refusals) and the rows it writes."""

from __future__ import annotations

import json
from pathlib import Path


def write_jobs(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().split("\n") if line]
