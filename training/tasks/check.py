"""Whether a task was done in a repository: its test command passes there, and the files that changed are exactly
the task's expected files (what tests and caches leave behind, and the .git folder, do not count)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from warpcode.training.tasks.task import Task

IGNORED_FOLDERS = {".git", "__pycache__", ".pytest_cache"}
TEST_TIMEOUT_S = 120.0


@dataclass
class Verdict:
    ok: bool
    reason: str  # why not ("" when ok)


def write_repo(files: dict[str, str], root: Path) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def read_repo(root: Path) -> dict[str, str]:
    """Every file under `root` as text, by path relative to it, less the ignored folders."""
    files = {}
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [name for name in subfolders if name not in IGNORED_FOLDERS]
        for name in names:
            path = Path(folder, name)
            files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8", errors="replace")
    return files


def changed_files(before: dict[str, str], root: Path) -> list[str]:
    after = read_repo(root)
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


def check(task: Task, root: Path) -> Verdict:
    changed = changed_files(task.files, root)
    if changed != sorted(task.expected_files):
        return Verdict(False, f"changed {changed or 'nothing'}, expected {sorted(task.expected_files)}")
    return run_test_command(task, root)


def run_test_command(task: Task, root: Path) -> Verdict:
    try:
        done = subprocess.run(["/bin/sh", "-c", task.test_command], cwd=root, capture_output=True, text=True,
                              timeout=TEST_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return Verdict(False, f"the test command ran past {TEST_TIMEOUT_S:.0f} s")
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()
        return Verdict(False, f"the test command exited {done.returncode}: {' | '.join(output[-3:])}")
    return Verdict(True, "")
