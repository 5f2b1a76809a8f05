from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from warpcode.tools import PatchError, Workspace, apply_patch
from warpcode.tools.workspace import MAX_TEXT_BYTES

from .real_git import git
from .unified_diff import unified


def test_git_diff_with_new_deleted_renamed_and_mode_changed_files(root: Path) -> None:
    (root / "keep.py").write_text("a = 1\nb = 2\nc = 3\n")
    (root / "gone.txt").write_text("bye\n")
    (root / "old_name.py").write_text("x = 1\n" * 5)
    (root / "tool.sh").write_text("echo hi\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    (root / "keep.py").write_text("a = 1\nb = 20\nc = 3")
    (root / "gone.txt").unlink()
    git(root, "mv", "old_name.py", "new_name.py")
    (root / "new_name.py").write_text("x = 1\n" * 4 + "y = 2\n")
    (root / "tool.sh").chmod(0o755)
    (root / "added dir").mkdir()
    (root / "added dir" / "new file.txt").write_text("fresh\n")
    git(root, "add", "-A")
    patch = git(root, "diff", "--cached", "-M")
    expected = {p: (root / p).read_bytes() for p in ["keep.py", "new_name.py", "tool.sh", "added dir/new file.txt"]}
    git(root, "reset", "-q", "--hard", "HEAD")
    git(root, "clean", "-qfd")

    result = apply_patch(Workspace(root), patch)

    kinds = sorted((change.kind, change.path) for change in result.changes)
    assert ("renamed", "new_name.py") in kinds and ("deleted", "gone.txt") in kinds
    assert ("created", "added dir/new file.txt") in kinds
    for path, data in expected.items():
        assert (root / path).read_bytes() == data
    assert not (root / "gone.txt").exists() and not (root / "old_name.py").exists()
    assert os.stat(root / "tool.sh").st_mode & 0o777 == 0o755
    assert git(root, "status", "--porcelain") == git(root, "status", "--porcelain")  # repo still readable
    assert "M keep.py" in result.render()


def test_plain_diff_u_output_applies(root: Path, tmp_path: Path) -> None:
    (root / "conf.ini").write_text("[main]\nname = a\nlevel = 1\n")
    edited = tmp_path / "conf.ini"
    edited.write_text("[main]\nname = b\nlevel = 1\n")
    patch = subprocess.run(["diff", "-u", str(root / "conf.ini"), str(edited)], capture_output=True, text=True).stdout
    patch = patch.replace(str(root / "conf.ini"), "conf.ini").replace(str(edited), "conf.ini")
    apply_patch(Workspace(root), patch)
    assert (root / "conf.ini").read_text() == edited.read_text()


def test_bad_hunk_in_second_file_leaves_every_file_untouched(root: Path) -> None:
    (root / "first.py").write_text("one\ntwo\nthree\n")
    (root / "second.py").write_text("alpha\nbeta\ngamma\n")
    patch = unified("one\ntwo\nthree\n", "one\nTWO\nthree\n", "first.py") + unified(
        "alpha\nBETA-NOT-THERE\ngamma\n", "alpha\nbeta2\ngamma\n", "second.py"
    )
    with pytest.raises(PatchError) as caught:
        apply_patch(Workspace(root), patch)
    assert caught.value.file == "second.py" and caught.value.hunk == 1
    assert "second.py, hunk 1" in str(caught.value) and "no file was changed" in str(caught.value)
    assert (root / "first.py").read_text() == "one\ntwo\nthree\n"
    assert (root / "second.py").read_text() == "alpha\nbeta\ngamma\n"
    assert sorted(p.name for p in root.iterdir()) == ["first.py", "second.py"]


def test_stale_line_numbers_are_found_by_context(root: Path) -> None:
    original = "".join(f"line {n}\n" for n in range(1, 41))
    target = original.replace("line 30\n", "line thirty\n")
    patch = unified(original, target, "f.txt").replace("@@ -27,7 +27,7 @@", "@@ -12,7 +12,7 @@")
    (root / "f.txt").write_text("header\n" * 5 + original)
    result = apply_patch(Workspace(root), patch)
    assert (root / "f.txt").read_text() == "header\n" * 5 + target
    assert "offset" in result.changes[0].notes[0]


def test_whitespace_tolerant_hunk_keeps_file_context(root: Path) -> None:
    (root / "f.py").write_text("def f():\n\tx = 1\n\treturn x\n")
    patch = "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n def f():\n-    x = 1\n+\tx = 2\n     return x\n"
    result = apply_patch(Workspace(root), patch)
    assert (root / "f.py").read_text() == "def f():\n\tx = 2\n\treturn x\n"
    assert "ignoring indentation" in result.changes[0].notes[0]


def test_missing_final_newline_is_added_or_kept_as_the_patch_says(root: Path) -> None:
    (root / "a.txt").write_text("x\ny")
    apply_patch(Workspace(root), unified("x\ny", "x\nz", "a.txt"))
    assert (root / "a.txt").read_bytes() == b"x\nz"
    apply_patch(Workspace(root), unified("x\nz", "x\nz\n", "a.txt"))
    assert (root / "a.txt").read_bytes() == b"x\nz\n"


def test_lf_patch_on_crlf_file_keeps_crlf(root: Path) -> None:
    (root / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    apply_patch(Workspace(root), unified("a\nb\nc\n", "a\nB\nc\n", "w.txt"))
    assert (root / "w.txt").read_bytes() == b"a\r\nB\r\nc\r\n"


def test_patch_errors_name_the_problem(root: Path, tmp_path: Path) -> None:
    ws = Workspace(root)
    (root / "exists.txt").write_text("x\n")
    with pytest.raises(PatchError, match="no unified diff"):
        apply_patch(ws, "just some text")
    with pytest.raises(PatchError, match="already exists"):
        apply_patch(ws, unified("", "new\n", "exists.txt").replace("--- a/exists.txt", "--- /dev/null"))
    with pytest.raises(PatchError, match="does not exist"):
        apply_patch(ws, unified("a\n", "b\n", "missing.txt"))
    with pytest.raises(PatchError, match="outside the workspace"):
        apply_patch(ws, unified("a\n", "b\n", "../escape.txt"))


class BufferedWorkspace(Workspace):
    """Text kept elsewhere, as an editor keeps unsaved buffers: reads prefer the buffer, writes go to it."""

    text_kept_elsewhere = True

    def __init__(self, root: Path, buffers: dict[Path, str]) -> None:
        super().__init__(root)
        self.buffers = buffers

    def read_text(self, path, max_bytes=MAX_TEXT_BYTES):
        on_disk = super().read_text(path, max_bytes)  # the path rules and missing/binary errors stay the tools'
        target = self.resolve(path)
        return on_disk if target not in self.buffers else replace(on_disk, text=on_disk.normalize(self.buffers[target]))

    def write_text(self, path, text, like=None):
        target = self.resolve_for_write(path)
        self.buffers[target] = text
        return target


def test_patch_on_text_kept_elsewhere_reads_and_writes_the_buffers(root: Path) -> None:
    (root / "a.py").write_text("x = 1\ny = 2\n")  # the buffer holds unsaved work the patch is made against
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    buffers = {(root / "a.py").resolve(): "x = 1\ny = 2\nz = 3  # unsaved\n"}
    ws = BufferedWorkspace(root, buffers)
    patch = (
        unified("x = 1\ny = 2\nz = 3  # unsaved\n", "x = 10\ny = 2\nz = 3  # unsaved\n", "a.py")
        + unified("one\ntwo\n", "one\n2\n", "crlf.txt")
        + unified("", "fresh\n", "new.txt").replace("--- a/new.txt", "--- /dev/null")
    )

    result = apply_patch(ws, patch)

    assert sorted(change.kind for change in result.changes) == ["created", "modified", "modified"]
    assert buffers[(root / "a.py").resolve()] == "x = 10\ny = 2\nz = 3  # unsaved\n"
    assert (root / "a.py").read_text() == "x = 1\ny = 2\n"  # the disk is not the patch's target
    assert buffers[(root / "crlf.txt").resolve()] == "one\n2\n"  # LF inside; the editor keeps its newline style
    assert (root / "new.txt").read_text() == "fresh\n"  # created files land on the disk


def test_patch_on_text_kept_elsewhere_writes_nothing_when_a_hunk_fails(root: Path) -> None:
    (root / "a.py").write_text("x = 1\n")
    (root / "b.py").write_text("y = 2\n")
    buffers: dict[Path, str] = {}
    patch = unified("x = 1\n", "x = 10\n", "a.py") + unified("nope\n", "y = 20\n", "b.py")
    with pytest.raises(PatchError, match=r"b\.py"):
        apply_patch(BufferedWorkspace(root, buffers), patch)
    assert buffers == {} and (root / "a.py").read_text() == "x = 1\n"
