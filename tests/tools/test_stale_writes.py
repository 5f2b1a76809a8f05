"""Write tools refuse to overwrite a file that changed on disk since the agent last read or wrote it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from warpcode.tools import PatchError, StaleFile, Workspace, apply_patch, edit_file, read_file, write_file

STALE = "changed on disk since you last read it"


@pytest.fixture
def read_then_edited_by_the_user(ws: Workspace, root: Path) -> Path:
    path = root / "a.py"
    path.write_text("x = 1\ny = 2\n")
    read_file(ws, "a.py")
    path.write_text("x = 1\ny = 2\nz = 3  # the user's\n")
    return path


def test_edit_file_refuses_and_keeps_refusing_until_the_file_is_read_again(
    ws: Workspace, read_then_edited_by_the_user: Path
) -> None:
    users = read_then_edited_by_the_user.read_text()
    with pytest.raises(StaleFile, match=rf"'a.py' {STALE} \(edited by the user or another program\): read it again"):
        edit_file(ws, "a.py", "y = 2", "y = 20")
    with pytest.raises(StaleFile):  # edit_file's own read did not count as the agent seeing the file
        edit_file(ws, "a.py", "y = 2", "y = 20")
    assert read_then_edited_by_the_user.read_text() == users
    read_file(ws, "a.py")
    edit_file(ws, "a.py", "y = 2", "y = 20")
    assert read_then_edited_by_the_user.read_text() == users.replace("y = 2", "y = 20")


def test_write_file_refuses(ws: Workspace, read_then_edited_by_the_user: Path) -> None:
    users = read_then_edited_by_the_user.read_text()
    with pytest.raises(StaleFile):
        write_file(ws, "a.py", "replaced\n")
    assert read_then_edited_by_the_user.read_text() == users


@pytest.mark.parametrize(
    "patch",
    [
        "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 20\n",
        "diff --git a/a.py b/b.py\nsimilarity index 100%\nrename from a.py\nrename to b.py\n",
    ],
    ids=["modify", "rename"],
)
def test_apply_patch_refuses(ws: Workspace, root: Path, read_then_edited_by_the_user: Path, patch: str) -> None:
    users = read_then_edited_by_the_user.read_text()
    with pytest.raises(PatchError, match=STALE):
        apply_patch(ws, patch)
    assert read_then_edited_by_the_user.read_text() == users and not (root / "b.py").exists()


def test_a_touch_without_a_change_is_no_refusal(ws: Workspace, root: Path) -> None:
    (root / "a.py").write_text("x = 1\n")
    read_file(ws, "a.py")
    os.utime(root / "a.py", ns=(1, 1))
    edit_file(ws, "a.py", "x = 1", "x = 2")
    assert (root / "a.py").read_text() == "x = 2\n"


def test_a_file_the_agent_never_read_is_not_refused(ws: Workspace, root: Path) -> None:
    (root / "a.py").write_text("x = 1\n")
    edit_file(ws, "a.py", "x = 1", "x = 2")
    write_file(ws, "b.py", "new\n")
    assert (root / "a.py").read_text() == "x = 2\n"


def test_the_agents_own_writes_are_remembered(ws: Workspace, root: Path) -> None:
    write_file(ws, "a.py", "x = 1\n")
    edit_file(ws, "a.py", "x = 1", "x = 2")  # its own write: no refusal
    apply_patch(ws, "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 2\n+x = 3\n")
    edit_file(ws, "a.py", "x = 3", "x = 4")
    (root / "a.py").write_text("x = 4\n# the user's\n")
    with pytest.raises(StaleFile):
        edit_file(ws, "a.py", "x = 4", "x = 5")
