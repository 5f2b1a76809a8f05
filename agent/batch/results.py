"""RESULTS.jsonl, durable: each row appended, flushed and fsynced as its job finishes, one row per id.

Reading it back drops a torn last line (a driver killed mid-write) and keeps the first row of an id. When rows
are to be redone (--redo, --retry-errors) the file is first rewritten without them, atomically (a temporary file
renamed over it), so that the redone job's new row is its only one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STATUSES = ("succeeded", "failed", "timeout", "error")


def parse_rows(data: bytes) -> tuple[dict[str, dict[str, Any]], bool]:
    """(the finished rows of a results file's bytes by id, the first row of an id kept; whether it holds anything
    else: a torn last line, a line that is no row, a repeated id). Reading alone changes nothing."""
    rows: dict[str, dict[str, Any]] = {}
    whole = data[: data.rfind(b"\n") + 1]  # a torn last line (no newline yet) was never a finished row
    lines = whole.split(b"\n")[:-1]  # rows end at "\n" alone: a row's strings may hold U+2028 and the like
    for line in lines:
        try:
            row = json.loads(line.decode("utf-8", errors="replace"))
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            rows.setdefault(row["id"], row)
    return rows, whole != data or len(rows) != len(lines)


class ResultsFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path.exists():
            self._load()

    def _load(self) -> None:
        self.rows, untidy = parse_rows(self.path.read_bytes())
        if untidy:
            self._rewrite(self.rows.values())

    def done(self, job_id: str, retry_errors: bool = False, redo: bool = False) -> bool:
        """Whether the job is recorded and stays as it is."""
        row = self.rows.get(job_id)
        if row is None or redo:
            return False
        return not (retry_errors and row.get("status") == "error")

    def forget(self, ids: set[str]) -> None:
        """Drop these ids' rows from the file (atomically) before they are redone."""
        if ids & self.rows.keys():
            self.rows = {key: row for key, row in self.rows.items() if key not in ids}
            self._rewrite(self.rows.values())

    def append(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())
        self.rows[row["id"]] = row

    def _rewrite(self, rows) -> None:
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            file.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
