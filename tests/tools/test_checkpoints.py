from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.tools import CheckpointError, Checkpoints, Workspace, list_files, search

from .real_git import git


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


def test_a_state_dir_chosen_inside_the_workspace_is_excluded_from_listing_search_and_checkpoints(root: Path) -> None:
    (root / "a.txt").write_text("needle\n")
    ws = Workspace(root, state_dir=root / "state")
    first = Checkpoints(ws).create()
    assert (root / "state" / "checkpoints.git").is_dir()
    assert list_files(ws).files == ["a.txt"]
    assert [m.path for m in search(ws, "needle").matches] == ["a.txt"]
    (root / "a.txt").write_text("changed\n")
    assert Checkpoints(ws).diff(first.id).count("diff --git") == 1


def marker_script(folder: Path, name: str) -> tuple[Path, Path]:
    """An executable `folder/name` that creates `folder/name.ran` when anything runs it."""
    folder.mkdir(parents=True, exist_ok=True)
    script, marker = folder / name, folder / f"{name}.ran"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(0o755)
    return script, marker


def test_inherited_git_variables_reach_no_git_call(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "planted"
    fsmonitor, fsmonitor_ran = marker_script(planted, "fsmonitor")
    _, hook_ran = marker_script(planted / "hooks", "reference-transaction")
    _, template_hook_ran = marker_script(planted / "template" / "hooks", "reference-transaction")
    (planted / "objects").mkdir()
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{fsmonitor}'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(planted / "hooks"))
    monkeypatch.setenv("GIT_TEMPLATE_DIR", str(planted / "template"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(planted / "objects"))
    (root / "a.txt").write_text("x\n")
    checkpoints = Checkpoints(Workspace(root))
    first = checkpoints.create("start")
    assert not fsmonitor_ran.exists() and not hook_ran.exists() and not template_hook_ran.exists()
    assert list((planted / "objects").iterdir()) == []
    assert [c.message for c in checkpoints.list()] == ["start"] and first.id


def test_the_users_global_git_config_reaches_no_git_call(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    fsmonitor, fsmonitor_ran = marker_script(tmp_path / "planted", "fsmonitor")
    _, hook_ran = marker_script(tmp_path / "planted" / "hooks", "reference-transaction")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".gitconfig").write_text(f"[core]\n\tfsmonitor = {fsmonitor}\n")
    (home / ".config" / "git" / "config").write_text(f"[core]\n\thooksPath = {tmp_path / 'planted' / 'hooks'}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (root / "a.txt").write_text("x\n")
    Checkpoints(Workspace(root)).create()
    assert not fsmonitor_ran.exists() and not hook_ran.exists()


def _is_in_checkpoint(root: Path, name: str) -> bool:
    checkpoints = Checkpoints(Workspace(root))
    first = checkpoints.create()
    (root / name).write_text("changed\n")
    return f"a/{name}" in checkpoints.diff(first.id)


def test_a_symlinked_git_exclude_file_is_not_read(root: Path, tmp_path: Path) -> None:
    git(root, "init", "-q")
    (tmp_path / "patterns").write_text("a.txt\n")
    exclude = root / ".git" / "info" / "exclude"
    exclude.unlink(missing_ok=True)
    exclude.symlink_to(tmp_path / "patterns")
    (root / "a.txt").write_text("x\n")
    assert _is_in_checkpoint(root, "a.txt")


def test_only_the_head_of_a_huge_git_exclude_file_is_read(root: Path) -> None:
    git(root, "init", "-q")
    (root / ".git" / "info" / "exclude").write_text("# padding\n" * 200_000 + "a.txt\n")
    (root / "a.txt").write_text("x\n")
    assert _is_in_checkpoint(root, "a.txt")


def test_environments_are_left_out_of_checkpoints_by_what_they_are_not_by_name(root: Path) -> None:
    """As in search: a real `python -m venv` environment (named `.venv` or anything) and a conda one are not
    snapshotted; a source folder named venv (CPython's Lib/venv) is, so an edit there can be undone."""
    git(root, "init", "-q")
    (root / "Lib" / "venv").mkdir(parents=True)
    (root / "Lib" / "venv" / "__init__.py").write_text("def create(): pass\n")
    (root / "venv").mkdir()
    (root / "venv" / "notes.txt").write_text("a folder named venv\n")
    (root / "env1").mkdir()
    (root / "env1" / "kept.txt").write_text("a name the escaped exclude line of env[12] must not match\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, timeout=120)
    (root / ".venv" / ".gitignore").unlink(missing_ok=True)  # Python 3.13's venv writes one; older ones do not
    for name in ("tools env", "env[12]"):  # names an exclude line must escape
        (root / name / "lib").mkdir(parents=True)
        (root / name / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (root / name / "lib" / "site.py").write_text("x = 1\n")
    (root / "conda" / "conda-meta").mkdir(parents=True)
    (root / "conda" / "conda-meta" / "history").write_text("==> 2024-01-01 <==\n")
    (root / "conda" / "lib").mkdir()
    (root / "conda" / "lib" / "site.py").write_text("x = 1\n")
    checkpoints = Checkpoints(Workspace(root))
    first = checkpoints.create()
    snapshot = set(git_in_shadow(checkpoints, "ls-tree", "-r", "--name-only", first.id).splitlines())
    assert snapshot == {"Lib/venv/__init__.py", "venv/notes.txt", "env1/kept.txt"}

    (root / "Lib" / "venv" / "__init__.py").write_text("def create(): raise\n")
    checkpoints.restore(first.id)
    assert (root / "Lib" / "venv" / "__init__.py").read_text() == "def create(): pass\n"
    assert (root / ".venv" / "pyvenv.cfg").is_file() and (root / "conda" / "lib" / "site.py").is_file()


def git_in_shadow(checkpoints: Checkpoints, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        env={**os.environ, "GIT_DIR": str(checkpoints.git_dir)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
