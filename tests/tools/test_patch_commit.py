"""apply_patch's commit: every target checked before anything is written, and a commit killed midway finished or
undone by the next apply_patch (or recover_interrupted_patch), with no temp file left behind."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.tools import PatchError, Workspace, apply_patch, patch_journal, recover_interrupted_patch

from .hostile import kill_when, many_files, patch_of, patched, temp_files

# apply_patch in a process of its own, each temp file written and each rename slowed a little: a patch of
# thousands of files then takes long enough to be killed in the middle of its staging or of its renames.
SLOW_APPLY = """
import os, sys, time
from pathlib import Path
from warpcode.tools import Workspace, apply_patch, patch_journal

def slowed(function):
    def call(*args, **kwargs):
        time.sleep(0.0002)
        return function(*args, **kwargs)
    return call

patch_journal.write_temp_at = slowed(patch_journal.write_temp_at)
os.rename, os.replace = slowed(os.rename), slowed(os.replace)
apply_patch(Workspace(sys.argv[1]), Path(sys.argv[2]).read_text())
"""
FILES = 2000


def _modify_and_create(target: str) -> str:
    return (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
        f"diff --git a/{target} b/{target}\nnew file mode 100644\n--- /dev/null\n+++ b/{target}\n@@ -0,0 +1 @@\n+x\n"
    )


def _make_socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


@pytest.mark.parametrize("make", [Path.mkdir, os.mkfifo, _make_socket], ids=["directory", "fifo", "socket"])
def test_creating_a_file_where_a_non_file_is_changes_nothing(root: Path, make) -> None:
    (root / "a.txt").write_text("one\n")
    make(root / "target")
    with pytest.raises(PatchError, match=r"no file was changed\. target: 'target' is a"):
        apply_patch(Workspace(root), _modify_and_create("target"))
    assert (root / "a.txt").read_text() == "one\n"
    assert temp_files(root) == []


def test_renaming_onto_a_directory_changes_nothing(root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    (root / "old.txt").write_text("x\n")
    (root / "taken").mkdir()
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
    patch += "diff --git a/old.txt b/taken\nsimilarity index 100%\nrename from old.txt\nrename to taken\n"
    with pytest.raises(PatchError, match="'taken' is a directory"):
        apply_patch(Workspace(root), patch)
    assert (root / "a.txt").read_text() == "one\n" and (root / "old.txt").read_text() == "x\n"
    assert temp_files(root) == []


def test_a_file_in_the_way_of_a_new_directory_changes_nothing(root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    with pytest.raises(PatchError, match=r"'a\.txt' on the way to this file is not a directory"):
        apply_patch(Workspace(root), _modify_and_create("a.txt/inner/new.py"))
    assert (root / "a.txt").read_text() == "one\n"
    assert temp_files(root) == []


def test_a_write_failing_while_staging_undoes_everything(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "a.txt").write_text("one\n")
    written: list[str] = []

    def disk_full_on_the_second(dir_fd, tmp, *args, **kwargs):
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(tmp)
        real_write_temp(dir_fd, tmp, *args, **kwargs)

    real_write_temp = patch_journal.write_temp_at
    monkeypatch.setattr(patch_journal, "write_temp_at", disk_full_on_the_second)
    with pytest.raises(PatchError, match="No space left on device"):
        apply_patch(Workspace(root), _modify_and_create("new/deep/b.txt"))
    assert (root / "a.txt").read_text() == "one\n"
    assert not (root / "new").exists()  # the directories it made are gone too
    assert temp_files(root) == [] and written
    assert not (root / ".warpcode" / patch_journal.JOURNAL_NAME).exists()


def _start_slow_apply(root: Path, rels: list[str], tmp_path: Path) -> subprocess.Popen:
    patch_file = tmp_path / "big.patch"
    patch_file.write_text(patch_of(rels))
    return subprocess.Popen([sys.executable, "-c", SLOW_APPLY, str(root), str(patch_file)])


@pytest.mark.slow
def test_kill_9_during_the_renames_is_finished_by_the_next_apply_patch(root: Path, tmp_path: Path) -> None:
    rels = many_files(root, FILES)
    applying = _start_slow_apply(root, rels, tmp_path)
    assert kill_when(applying, lambda: (root / rels[0]).read_text() != "old 0\n")
    assert 0 < patched(root, rels) < FILES and temp_files(root)  # killed mid-commit: a torn state on the disk

    apply_patch(Workspace(root), "--- /dev/null\n+++ b/other.txt\n@@ -0,0 +1 @@\n+next\n")

    assert patched(root, rels) == FILES
    assert temp_files(root) == []
    assert (root / "other.txt").read_text() == "next\n"


@pytest.mark.slow
def test_kill_9_while_staging_is_undone_at_the_next_start(root: Path, tmp_path: Path) -> None:
    rels = many_files(root, FILES)
    applying = _start_slow_apply(root, rels, tmp_path)
    assert kill_when(applying, lambda: any(name.endswith(".warpcode-tmp") for name in os.listdir(root / "d0")))
    assert temp_files(root)

    done = recover_interrupted_patch(Workspace(root))

    assert done is not None and "Undid" in done
    assert patched(root, rels) == 0
    assert temp_files(root) == []
    assert recover_interrupted_patch(Workspace(root)) is None
