from __future__ import annotations

import os
from pathlib import Path

import pytest

from warpcode.tools import PathOutsideWorkspace, ProtectedPath, Workspace, list_files, read_file, write_file


def test_relative_and_absolute_paths_inside_resolve(ws: Workspace, root: Path) -> None:
    (root / "a.txt").write_text("x")
    assert ws.resolve("a.txt") == root.resolve() / "a.txt"
    assert ws.resolve(str(root / "a.txt")) == root.resolve() / "a.txt"
    assert ws.resolve("sub/../a.txt") == root.resolve() / "a.txt"


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd"])
def test_lexical_escapes_are_refused(ws: Workspace, path: str) -> None:
    with pytest.raises(PathOutsideWorkspace, match="outside the workspace"):
        ws.resolve(path)


def test_symlinked_file_pointing_outside_is_refused(ws: Workspace, root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (root / "link.txt").symlink_to(secret)
    with pytest.raises(PathOutsideWorkspace, match="symlink"):
        read_file(ws, "link.txt")
    with pytest.raises(PathOutsideWorkspace):
        write_file(ws, "link.txt", "overwritten")
    assert secret.read_text() == "secret"


def test_symlinked_parent_directory_pointing_outside_is_refused(ws: Workspace, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathOutsideWorkspace):
        write_file(ws, "linked/new.txt", "x")
    assert not (outside / "new.txt").exists()


def test_symlink_inside_the_workspace_is_followed(ws: Workspace, root: Path) -> None:
    (root / "real.txt").write_text("content\n")
    (root / "alias.txt").symlink_to(root / "real.txt")
    write_file(ws, "alias.txt", "changed\n")
    assert (root / "alias.txt").is_symlink()
    assert (root / "real.txt").read_text() == "changed\n"


def test_tools_never_write_into_git_or_state_dirs(ws: Workspace, root: Path) -> None:
    (root / ".git").mkdir()
    with pytest.raises(ProtectedPath):
        write_file(ws, ".git/config", "x")
    with pytest.raises(ProtectedPath):
        write_file(ws, ".warpcode/x", "x")


def test_ignore_rules_nested_gitignore_exclude_and_defaults(ws: Workspace, root: Path) -> None:
    files = [
        "keep.py",
        "debug.log",
        "important.log",
        "build/out.js",
        "src/app.py",
        "src/gen/code.py",
        "src/local.tmp",
        "node_modules/pkg/index.js",
        "__pycache__/x.cpython-311.pyc",
        "env2/lib/site.py",
        "secret.key",
    ]
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    (root / ".gitignore").write_text("*.log\n!important.log\nbuild/\n")
    (root / "src" / ".gitignore").write_text("gen/\n*.tmp\n")
    (root / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("*.key\n")
    listed = list_files(Workspace(root)).files
    assert listed == [".gitignore", "important.log", "keep.py", "src/.gitignore", "src/app.py"]
    assert ws.is_ignored("src/gen/code.py")
    assert ws.is_ignored("env2/lib/site.py")
    assert not ws.is_ignored("important.log")


def test_workspace_root_must_be_a_directory(tmp_path: Path) -> None:
    from warpcode.tools import InvalidArgument

    with pytest.raises(InvalidArgument):
        Workspace(tmp_path / "missing")


def test_mode_is_preserved_on_write(ws: Workspace, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    write_file(ws, "run.sh", "echo bye\n")
    assert os.stat(script).st_mode & 0o777 == 0o755
    assert not [p for p in root.iterdir() if p.name.endswith(".warpcode-tmp")]
