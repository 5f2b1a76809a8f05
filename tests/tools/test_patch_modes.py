"""File modes in git diffs: only the executable bit is applied (0o755 or 0o644, minus the umask), as git does;
symlink (120000) and submodule (160000) entries are refused rather than written as regular files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from warpcode.tools import PatchError, Workspace, apply_patch


def _new_file(name: str, mode: str, body: str = "+echo hi\n") -> str:
    return f"diff --git a/{name} b/{name}\nnew file mode {mode}\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n{body}"


@pytest.fixture
def umask_027():
    previous = os.umask(0o027)
    yield
    os.umask(previous)


@pytest.mark.parametrize(
    ("mode", "expected"), [("100755", 0o750), ("104755", 0o750), ("100644", 0o640)], ids=["100755", "104755", "100644"]
)
def test_only_the_executable_bit_is_applied_minus_the_umask(root: Path, umask_027, mode: str, expected: int) -> None:
    apply_patch(Workspace(root), _new_file("run.sh", mode))
    assert os.stat(root / "run.sh").st_mode & 0o7777 == expected


def test_a_mode_change_of_an_existing_file_sets_only_the_executable_bit(root: Path) -> None:
    (root / "tool").write_text("echo\n")
    apply_patch(Workspace(root), "diff --git a/tool b/tool\nold mode 100644\nnew mode 106755\n")
    assert os.stat(root / "tool").st_mode & 0o7777 == 0o755


@pytest.mark.parametrize(
    ("patch", "refusal"),
    [
        (_new_file("link", "120000", "+/etc/passwd\n\\ No newline at end of file\n"), "symlink entries"),
        (_new_file("sub", "160000", "+Subproject commit 0123456789abcdef0123456789abcdef01234567\n"), "submodule"),
        (
            "diff --git a/link b/link\ndeleted file mode 120000\n--- a/link\n+++ /dev/null\n@@ -1 +0,0 @@\n"
            "-target.txt\n\\ No newline at end of file\n",
            "symlink entries",
        ),
    ],
    ids=["new symlink", "new submodule", "deleted symlink"],
)
def test_symlink_and_submodule_entries_are_refused(root: Path, patch: str, refusal: str) -> None:
    (root / "target.txt").write_text("target.txt")
    (root / "link").symlink_to("target.txt")
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(PatchError, match=refusal):
        apply_patch(Workspace(root), "--- /dev/null\n+++ b/other.txt\n@@ -0,0 +1 @@\n+x\n" + patch)
    assert sorted(p.name for p in root.iterdir() if p.name != ".warpcode") == before
    assert (root / "target.txt").read_text() == "target.txt"
