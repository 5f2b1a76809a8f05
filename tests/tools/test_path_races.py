"""Paths swapped between the check and the open: a directory replaced by a symlink to outside never leads a read
or a write out of the workspace; the tool answers that the path changed instead."""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import pytest

from warpcode.tools import PathChanged, ToolError, Workspace, read_file, search, write_file

from .hostile import swapping

SECRET = "OUTSIDE secret\n"
needs_renameat2 = pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "renameat2"), reason="the swapper needs Linux's renameat2"
)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "f.txt").write_text(SECRET)
    return directory


@pytest.fixture
def inside(root: Path) -> Path:
    directory = root / "d"
    directory.mkdir()
    (directory / "f.txt").write_text("inside\n")
    return directory


def _swap_right_after_the_check(ws: Workspace, inside: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next resolve() checks the real directory, then the directory is replaced by a symlink to outside."""
    real_resolve = ws.resolve

    def resolve_then_swap(path):
        target = real_resolve(path)
        if not inside.is_symlink():
            inside.rename(inside.with_name("saved"))
            inside.symlink_to(outside, target_is_directory=True)
        return target

    monkeypatch.setattr(ws, "resolve", resolve_then_swap)


def test_a_read_after_a_swap_is_refused(ws: Workspace, root: Path, inside: Path, outside: Path, monkeypatch) -> None:
    (root / "alias").symlink_to("d")  # a symlink inside: the read resolves the path, then opens the real one
    _swap_right_after_the_check(ws, inside, outside, monkeypatch)
    with pytest.raises(PathChanged, match=r"'alias/f.txt' changed while it was being opened .*; try again"):
        read_file(ws, "alias/f.txt")


def test_a_write_after_a_swap_is_refused(ws: Workspace, inside: Path, outside: Path, monkeypatch) -> None:
    _swap_right_after_the_check(ws, inside, outside, monkeypatch)
    with pytest.raises(PathChanged):
        ws.write_bytes("d/new.txt", b"agent\n")
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]


def test_a_file_swapped_for_a_symlink_is_refused(ws: Workspace, root: Path, outside: Path, monkeypatch) -> None:
    (root / "f.txt").write_text("inside\n")
    (root / "alias.txt").symlink_to("f.txt")
    real_resolve = ws.resolve

    def resolve_then_swap(path):
        target = real_resolve(path)
        (root / "f.txt").unlink()
        (root / "f.txt").symlink_to(outside / "f.txt")
        return target

    monkeypatch.setattr(ws, "resolve", resolve_then_swap)
    with pytest.raises(PathChanged):
        ws.read_bytes("alias.txt")


@needs_renameat2
def test_tools_racing_a_directory_symlink_swap_stay_inside(ws: Workspace, inside: Path, outside: Path) -> None:
    leaked_reads = calls = refused = crashed = 0
    with swapping(inside, outside, seconds=3.0) as swapper:
        deadline = time.monotonic() + 10
        while swapper.poll() is None and time.monotonic() < deadline:
            for call in (
                lambda: read_file(ws, "d/f.txt").content,
                lambda: search(ws, "secret").render(),
                lambda: write_file(ws, "d/w.txt", "agent\n").render(),
            ):
                calls += 1
                try:
                    leaked_reads += "OUTSIDE" in call()
                except ToolError:
                    refused += 1
                except OSError:
                    crashed += 1
    assert calls > 300 and refused > 0  # the race really ran
    assert leaked_reads == 0 and crashed == 0
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"] and (outside / "f.txt").read_text() == SECRET
    assert (inside / "w.txt").read_text() == "agent\n"
