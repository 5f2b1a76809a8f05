from __future__ import annotations

from pathlib import Path

import pytest

from warpcode.tools import AmbiguousEdit, EditNotFound, FileExists, InvalidArgument, Workspace, edit_file

SOURCE = """class Greeter:
    def greet(self, name):
        if name:
            return f"Hello {name}"
        return "Hello"

    def part(self):
        return 1
"""


@pytest.fixture
def greeter(root: Path) -> Path:
    path = root / "greeter.py"
    path.write_text(SOURCE)
    return path


def test_exact_edit(ws: Workspace, greeter: Path) -> None:
    result = edit_file(ws, "greeter.py", 'return "Hello"', 'return "Hi"')
    assert result.strategy == "exact" and result.first_line == 5
    assert greeter.read_text() == SOURCE.replace('return "Hello"', 'return "Hi"')
    assert '+        return "Hi"' in result.diff()


def test_ambiguous_edit_is_refused_unless_replace_all(ws: Workspace, greeter: Path) -> None:
    with pytest.raises(AmbiguousEdit, match=r"2 places.*lines 4, 5.*replace_all"):
        edit_file(ws, "greeter.py", "Hello", "Hi")
    assert greeter.read_text() == SOURCE
    result = edit_file(ws, "greeter.py", "Hello", "Hi", replace_all=True)
    assert result.replacements == 2
    assert greeter.read_text() == SOURCE.replace("Hello", "Hi")


def test_indentation_tolerant_match_reindents_the_replacement(ws: Workspace, greeter: Path) -> None:
    old = 'def greet(self, name):\n  if name:\n    return f"Hello {name}"'
    new = 'def greet(self, name):\n  if name:\n    name = name.strip()\n    return f"Hello {name}"'
    result = edit_file(ws, "greeter.py", old, new)
    assert result.strategy == "ignoring indentation"
    expected = SOURCE.replace(
        '            return f"Hello {name}"\n', '            name = name.strip()\n            return f"Hello {name}"\n'
    )
    assert greeter.read_text() == expected


def test_trailing_whitespace_differences_are_tolerated(ws: Workspace, root: Path) -> None:
    (root / "t.txt").write_text("alpha   \nbeta\n")
    result = edit_file(ws, "t.txt", "alpha\nbeta", "gamma\nbeta")
    assert result.strategy == "ignoring trailing whitespace"
    assert (root / "t.txt").read_text() == "gamma\nbeta\n"


def test_no_match_lists_the_closest_lines_with_numbers(ws: Workspace, greeter: Path) -> None:
    with pytest.raises(EditNotFound) as caught:
        edit_file(ws, "greeter.py", "def part(self):\n    return 2", "x")
    message = str(caught.value)
    assert "     7\t    def part(self):" in message
    assert "     8\t        return 1" in message
    assert greeter.read_text() == SOURCE


def test_empty_old_text_creates_a_file_but_never_overwrites(ws: Workspace, root: Path, greeter: Path) -> None:
    assert edit_file(ws, "pkg/new.py", "", "x = 1\n").created
    assert (root / "pkg/new.py").read_text() == "x = 1\n"
    with pytest.raises(FileExists):
        edit_file(ws, "greeter.py", "", "x")


def test_identical_texts_are_refused(ws: Workspace, greeter: Path) -> None:
    with pytest.raises(InvalidArgument, match="identical"):
        edit_file(ws, "greeter.py", "return 1", "return 1")


def test_deleting_a_block(ws: Workspace, greeter: Path) -> None:
    edit_file(ws, "greeter.py", "\n    def part(self):\n        return 1\n", "\n")
    assert greeter.read_text() == SOURCE.split("\n    def part")[0] + "\n"
