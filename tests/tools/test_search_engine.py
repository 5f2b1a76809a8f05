"""search on RE2: hostile patterns run in linear time; what RE2 cannot express is refused with a hint; the
line-at-a-time scan reports what the old whole-file scan reported."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpcode.tools import InvalidArgument, Workspace, search


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


def _search_seconds(root: Path, pattern: str, limit_s: float) -> float:
    """Seconds a search takes in a process of its own: a backtracking engine holds the GIL, so only a process
    can be stopped (and the test fail) when it runs past `limit_s`."""
    code = "import sys; from warpcode.tools import Workspace, search; search(Workspace(sys.argv[1]), sys.argv[2])"
    started = time.monotonic()
    try:
        subprocess.run([sys.executable, "-c", code, str(root), pattern], check=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"search for {pattern!r} still running after {limit_s} s")
    return time.monotonic() - started


@pytest.mark.parametrize("pattern", [r"(a*)*b", r"(a|aa)+$", r"(x+x+)+y"])
def test_catastrophic_backtracking_patterns_finish_at_once(tmp_path: Path, pattern: str) -> None:
    (tmp_path / "bait.txt").write_text("a" * 40_000 + "x" * 40 + "\n")
    assert _search_seconds(tmp_path, pattern, limit_s=10.0) < 10.0


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [(r"foo(?=bar)", "look-ahead"), (r"(?<!x)y", "look-behind"), (r"(a)\1", "backreferences"), (r"end\Z", r"\z")],
)
def test_patterns_re2_cannot_run_get_a_hint(ws: Workspace, pattern: str, hint: str) -> None:
    with pytest.raises(InvalidArgument, match="Invalid regular expression") as raised:
        search(ws, pattern)
    assert hint in str(raised.value) and "\n" not in str(raised.value)


def test_matches_per_line_and_across_lines(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1  # x x\r\ny = 2\ndef f():\n    return x\n")
    assert [(m.line, m.text) for m in search(ws, "x").matches] == [(1, "x = 1  # x x"), (4, "    return x")]
    assert [m.line for m in search(ws, r"^def").matches] == [3]
    assert [m.line for m in search(ws, r"2\ndef").matches] == [2]
    assert [m.line for m in search(ws, r"(?s)y = .*return").matches] == [2]
    assert [m.line for m in search(ws, r"x\r?$").matches] == [1, 4]


def test_non_utf8_bytes_do_not_stop_the_scan(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 needle\nneedle two\n")
    assert [(m.line, m.text) for m in search(ws, "needle").matches] == [(1, "caf\ufffd needle"), (2, "needle two")]
