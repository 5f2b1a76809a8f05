"""A small project with a bug and its test (calc.py subtracts in add()), the scripted turns that fix it, and the
git state a batch run must leave as it was."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = (
    "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)
FIX = "a + b"
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"


def fix_turns(before: list[dict] | None = None) -> list[dict]:
    """Read calc.py, fix it, add a new file, end the turn."""
    return [
        *(before or []),
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": FIX}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "fixed add\n"}}]},
        {"text": "Fixed add()."},
    ]  # fmt: skip


def run_command(command: str) -> dict:
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_project(path: Path, *, git_repo: bool) -> Path:
    path.mkdir(parents=True)
    (path / "calc.py").write_text(BUGGY)
    (path / "test_calc.py").write_text(TEST)
    if git_repo:
        git("init", "-q", "-b", "main", cwd=path)
        git("add", "-A", cwd=path)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base", cwd=path)
        (path / "scratch.txt").write_text("the user's untracked file\n")  # a dirty tree must stay as it is
    return path


def repo_state(repo: Path) -> tuple[str, str, str, str]:
    return (
        git("status", "--porcelain", "--ignored", cwd=repo),
        git("rev-parse", "HEAD", cwd=repo),
        git("branch", "--list", "--all", cwd=repo),
        git("worktree", "list", "--porcelain", cwd=repo),
    )


def git_dir_files(repo: Path) -> dict[str, str]:
    """Every file under the repository's .git (hooks, config, refs, objects, index, ...) with its bytes' hash."""
    git_dir = repo / ".git"
    return {
        path.relative_to(git_dir).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(git_dir.rglob("*"))
        if path.is_file()
    }
