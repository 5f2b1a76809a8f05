"""JOBS.jsonl rows (docs/reference/batch-files.md): parsed and checked; a row that cannot run becomes a BadRow."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from warpcode.agent.backends import spec_relative_to
from warpcode.agent.permissions import MODES

HEADLESS_MODES = tuple(mode for mode in MODES if mode != "ask")  # nobody can answer a question in a batch
_FIELDS = {
    "id": str,
    "repo": str,
    "instruction": str,
    "base": str,
    "model": str,
    "mode": str,
    "test_command": str,
    "timeout_s": (int, float),
    "max_turn_requests": int,
}
_REQUIRED = ("id", "repo", "instruction")


@dataclass
class Job:
    id: str
    repo: Path  # absolute: a relative `repo` is taken from the JOBS file's folder
    instruction: str
    base: str | None = None
    model: str | None = None  # its path (scripted:, local:, a checkpoint) absolute, from the JOBS file's folder
    mode: str | None = None
    test_command: str | None = None
    timeout_s: float | None = None
    max_turn_requests: int | None = None


@dataclass
class BadRow:
    """A row that cannot run: its result is an `error` row with this id (`line:N` when the row has no usable,
    unique id of its own) and the problem."""

    id: str
    repo: str | None
    error: str


def read_jobs(path: Path) -> list[Job | BadRow]:
    """Every non-blank line of JOBS.jsonl, in order, as a Job or a BadRow naming the problem. Lines end at a line
    break byte (not at the other breaks Unicode knows, which a JSON string may hold), and each is decoded alone: a
    line that is not UTF-8 is its own bad row."""
    rows: list[Job | BadRow] = []
    seen: set[str] = set()
    for number, data in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            line = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            rows.append(BadRow(f"line:{number}", None, f"line {number}: not UTF-8 text (byte {exc.start + 1})"))
            continue
        if line.strip():
            row = parse_row(line, number, path.parent, seen)
            rows.append(row)
            seen.add(row.id)
    return rows


def parse_row(line: str, number: int, folder: Path, seen: set[str]) -> Job | BadRow:
    where = f"line {number}"
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return BadRow(f"line:{number}", None, f"{where}: not valid JSON ({exc})")
    if not isinstance(value, dict):
        return BadRow(f"line:{number}", None, f"{where}: a job is a JSON object, got {type(value).__name__}")
    if not _is_text(value):
        return BadRow(f"line:{number}", None, f"{where}: a \\ud800-\\udfff escape without its pair is no character")
    job_id = value.get("id")
    usable_id = isinstance(job_id, str) and job_id != "" and job_id not in seen
    row_id = job_id if usable_id else f"line:{number}"
    repo = value.get("repo") if isinstance(value.get("repo"), str) else None
    bad = lambda problem: BadRow(row_id, repo, f"{where}: {problem}")
    if isinstance(job_id, str) and job_id in seen:
        return bad(f"duplicate id {job_id!r} (ids must be unique)")
    for name in _REQUIRED:
        if name not in value:
            return bad(f"missing required field {name!r}")
    for name, item in value.items():
        if name not in _FIELDS:
            return bad(f"unknown field {name!r}; known: {', '.join(_FIELDS)}")
        if item is None and name not in _REQUIRED:
            continue
        if not isinstance(item, _FIELDS[name]) or isinstance(item, bool):
            return bad(f"field {name!r} has the wrong type ({type(item).__name__})")
    if job_id == "":
        return bad("'id' is empty")
    if value.get("mode") is not None and value["mode"] not in HEADLESS_MODES:
        return bad(f"mode must be one of {', '.join(HEADLESS_MODES)}, got {value['mode']!r}")
    if value.get("timeout_s") is not None and value["timeout_s"] <= 0:
        return bad("timeout_s must be positive")
    if value.get("max_turn_requests") is not None and value["max_turn_requests"] < 1:
        return bad("max_turn_requests must be at least 1")
    repo_path = (folder / Path(value["repo"]).expanduser()).resolve()
    if not repo_path.is_dir():
        return bad(f"repository not found: {value['repo']!r} is not a directory")
    fields = {name: value.get(name) for name in _FIELDS if name not in ("id", "repo")}
    if fields["model"]:  # every path of a row is taken from the JOBS file's folder, wherever the batch runs
        fields["model"] = spec_relative_to(fields["model"], folder)
    timeout = fields.pop("timeout_s")
    return Job(job_id, repo_path, timeout_s=float(timeout) if timeout is not None else None, **fields)


def _is_text(value: object) -> bool:
    """Whether every string in the row is text UTF-8 can hold: JSON lets `\\ud800` stand alone (half a surrogate
    pair), and such a string in the row's result would stop the batch when the row is written."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
