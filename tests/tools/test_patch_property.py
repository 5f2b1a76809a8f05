"""Random files, random edits: the diff difflib writes must reproduce the edited file exactly."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from warpcode.tools import Workspace, apply_patch

from .unified_diff import unified

LINE = st.text(alphabet=st.sampled_from(list("ab \t{}():=x\r")), max_size=8)


@st.composite
def edited_files(draw: st.DrawFn) -> tuple[str, str]:
    lines = draw(st.lists(LINE, max_size=30))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    final = draw(st.booleans())
    original = newline.join(lines) + (newline if final and lines else "")
    edited = list(lines)
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.integers(0, len(edited)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert":
            edited.insert(where, draw(LINE))
        elif edited and where < len(edited):
            if action == "delete":
                del edited[where]
            else:
                edited[where] = draw(LINE)
    final_after = draw(st.booleans())
    target = newline.join(edited) + (newline if final_after and edited else "")
    return original, target


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=edited_files(), context=st.integers(0, 3))
@example(pair=("\n:\n\n", "\n\n:\n"), context=0)  # a pure addition first: the numbers still place the next hunk
@example(pair=(":\n\n\n:", "\n\n\n:\n"), context=0)  # a repeated line, the last one without its newline
def test_difflib_diff_reproduces_target(pair: tuple[str, str], context: int) -> None:
    original, target = pair
    if original == target:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.txt"
        path.write_bytes(original.encode())
        apply_patch(Workspace(tmp), unified(original, target, "f.txt", context))
        assert path.read_bytes() == target.encode()
