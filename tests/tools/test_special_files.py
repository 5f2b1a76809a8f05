"""FIFOs, sockets and devices are refused by every tool that reads file contents, at once: opening a FIFO
for reading would otherwise block its worker until some writer shows up, and cancelling would wait on it."""

from __future__ import annotations

import os
import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from warpcode.tools import (
    PatchError,
    SpecialFile,
    Workspace,
    apply_patch,
    code_outline,
    edit_file,
    read_file,
    search,
    write_file,
)
from warpcode.tools.tag_cache import parse_one
from warpcode.tools.walk import WalkedFile


def _outcome_within(call: Callable[[], object], seconds: float = 5.0) -> object:
    """What `call` returned or raised; fails (instead of hanging the suite) when it blocks."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, "the tool blocked"
    return outcome[0]


@pytest.fixture
def fifo(root: Path) -> Path:
    os.mkfifo(root / "pipe.py")
    return root / "pipe.py"


TOOLS = {
    "read_file": lambda ws: read_file(ws, "pipe.py"),
    "edit_file": lambda ws: edit_file(ws, "pipe.py", "a", "b"),
    "write_file": lambda ws: write_file(ws, "pipe.py", "x\n"),
    "code_outline": lambda ws: code_outline(ws, "pipe.py"),
}


@pytest.mark.parametrize("tool", TOOLS)
def test_file_tools_refuse_a_fifo_without_blocking(ws: Workspace, fifo: Path, tool: str) -> None:
    outcome = _outcome_within(lambda: TOOLS[tool](ws))
    assert isinstance(outcome, SpecialFile) and "'pipe.py' is a FIFO (named pipe), not a regular file" in str(outcome)
    assert fifo.exists()


def test_apply_patch_refuses_a_fifo_without_blocking(ws: Workspace, fifo: Path) -> None:
    outcome = _outcome_within(lambda: apply_patch(ws, "--- a/pipe.py\n+++ b/pipe.py\n@@ -1 +1 @@\n-a\n+b\n"))
    assert isinstance(outcome, PatchError) and "FIFO" in str(outcome)


def test_a_socket_is_refused(ws: Workspace, root: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "sock"))
    with pytest.raises(SpecialFile, match="is a socket"):
        read_file(ws, "sock")
    server.close()


def test_search_skips_a_file_that_became_a_fifo_after_the_walk(
    ws: Workspace, root: Path, fifo: Path, monkeypatch
) -> None:
    (root / "a.py").write_text("needle\n")
    walked = [WalkedFile("pipe.py", str(fifo), 0), WalkedFile("a.py", str(root / "a.py"), 7)]
    monkeypatch.setattr(ws, "walk", lambda path=".": iter(walked))
    outcome = _outcome_within(lambda: search(ws, "needle"))
    assert not isinstance(outcome, Exception)
    assert [(m.path, m.line) for m in outcome.matches] == [("a.py", 1)]


def test_the_code_map_parser_skips_a_fifo(root: Path, fifo: Path) -> None:
    assert _outcome_within(lambda: parse_one(("pipe.py", str(fifo), "python", str(root)))) == ("pipe.py", None)


def test_a_device_is_refused(ws: Workspace, root: Path) -> None:
    try:
        os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    except PermissionError:
        pytest.skip("making a device node needs root")
    with pytest.raises(SpecialFile, match="'null' is a character device"):
        read_file(ws, "null")
