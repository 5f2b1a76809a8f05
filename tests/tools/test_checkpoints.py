from __future__ import annotations

import os
from pathlib import Path

import pytest

from warpcode.tools import CheckpointError, Checkpoints, Workspace, list_files, search

from .conftest import git


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and ".git" not in path.parts and ".warpcode" not in path.parts
    }


def test_restore_in_a_directory_that_is_not_a_git_repository(root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("b\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("ignored\n")
    checkpoints = Checkpoints(Workspace(root))
    first = checkpoints.create("before edits")
    before = _tree(root)

    (root / "a.txt").write_text("two\n")
    (root / "sub" / "b.txt").unlink()
    (root / "sub").rmdir()
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / "c.txt").write_text("created later\n")
    (root / "run.sh").chmod(0o644)
    (root / "debug.log").write_text("changed but ignored\n")
    second = checkpoints.create("after edits")

    assert [c.id for c in checkpoints.list()] == [second.id, first.id]
    assert "-one\n+two" in checkpoints.diff(first.id, second.id)
    result = checkpoints.restore(first.id)

    assert _tree(root) == before | {"debug.log": b"changed but ignored\n"}
    assert not (root / "new").exists()
    assert os.stat(root / "run.sh").st_mode & 0o111
    assert sorted(result.changed) == ["A sub/b.txt", "D new/deep/c.txt", "M a.txt", "M run.sh"]
    # The restore itself can be undone.
    checkpoints.restore(result.undo_checkpoint.id)
    assert (root / "new" / "deep" / "c.txt").read_text() == "created later\n"


def test_unchanged_workspace_reuses_the_latest_checkpoint(root: Path) -> None:
    (root / "a.txt").write_text("x\n")
    checkpoints = Checkpoints(Workspace(root))
    assert checkpoints.create("one").id == checkpoints.create("two").id
    assert len(checkpoints.list()) == 1


def test_diff_against_the_current_workspace(root: Path) -> None:
    (root / "a.txt").write_text("x\n")
    checkpoints = Checkpoints(Workspace(root))
    first = checkpoints.create()
    (root / "a.txt").write_text("y\n")
    assert "-x\n+y" in checkpoints.diff(first.id)


def test_unknown_checkpoint_is_a_typed_error(root: Path) -> None:
    (root / "a.txt").write_text("x\n")
    checkpoints = Checkpoints(Workspace(root))
    checkpoints.create()
    for bad in ["deadbeef", "--all", "HEAD~5"]:
        with pytest.raises(CheckpointError, match="Unknown checkpoint"):
            checkpoints.restore(bad)


def test_users_git_repository_is_left_exactly_as_it_was(root: Path) -> None:
    (root / "tracked.txt").write_text("v1\n")
    (root / "staged.txt").write_text("s1\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "initial")
    (root / "tracked.txt").write_text("stashed change\n")
    git(root, "stash", "-q")
    (root / "staged.txt").write_text("s2\n")
    git(root, "add", "staged.txt")
    (root / "tracked.txt").write_text("v2 unstaged\n")
    (root / "untracked.txt").write_text("u\n")

    def state() -> tuple[str, ...]:
        return (
            git(root, "status", "--porcelain=v1", "--branch"),
            git(root, "rev-parse", "HEAD"),
            git(root, "ls-files", "--stage"),
            git(root, "stash", "list"),
            git(root, "branch", "--list"),
        )

    before, files_before = state(), _tree(root)
    checkpoints = Checkpoints(Workspace(root))
    first = checkpoints.create("start")
    (root / "tracked.txt").write_text("agent edit\n")
    (root / "untracked.txt").unlink()
    (root / "agent_new.py").write_text("print()\n")
    checkpoints.create("after agent")
    checkpoints.restore(first.id)

    assert state() == before
    assert _tree(root) == files_before


def test_state_dir_is_excluded_from_listing_and_search(root: Path) -> None:
    (root / "a.txt").write_text("needle\n")
    ws = Workspace(root)
    Checkpoints(ws).create()
    assert (root / ".warpcode").is_dir()
    assert list_files(ws).files == ["a.txt"]
    assert [m.path for m in search(ws, "needle").matches] == ["a.txt"]
