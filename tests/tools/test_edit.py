from __future__ import annotations

import time
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


# Mistakes models make in old_text, each once, on small files. tests/tools/test_edit_corpus.py runs them on
# real commits.


def test_a_trailing_blank_line_in_old_text_adds_no_blank_line(ws: Workspace, greeter: Path) -> None:
    # Indented by 2 instead of 4 (a tolerant match) and ending with a blank line that is not in the file there.
    edit_file(ws, "greeter.py", "  def part(self):\n    return 1\n\n", "  def part(self):\n    return 2\n\n")
    assert greeter.read_text() == SOURCE.replace("return 1", "return 2")


def test_one_line_without_indentation_matches_the_whole_line(ws: Workspace, greeter: Path) -> None:
    new = 'if not name:\n    raise ValueError("name")\nreturn f"Hello {name}"'
    result = edit_file(ws, "greeter.py", 'return f"Hello {name}"', new)
    assert result.strategy == "ignoring indentation"
    expected = SOURCE.replace(
        '            return f"Hello {name}"\n',
        '            if not name:\n                raise ValueError("name")\n            return f"Hello {name}"\n',
    )
    assert greeter.read_text() == expected


def test_deleting_one_line_written_without_indentation_leaves_no_indentation(ws: Workspace, greeter: Path) -> None:
    edit_file(ws, "greeter.py", 'return "Hello"', "")
    assert greeter.read_text() == SOURCE.replace('        return "Hello"\n', "")


GO_HELP = "func help() string {\n\treturn `usage:\n  tool [flags]\n`\n}\n"


def test_reindenting_keeps_the_files_characters_and_raw_strings(ws: Workspace, root: Path) -> None:
    # Over-indented by one tab; the lines added inside the raw string are indented with spaces, rightly.
    (root / "help.go").write_text(GO_HELP)
    old = "\t\treturn `usage:\n\t  tool [flags]\n\t`"
    new = "\t\treturn `usage:\n\t  tool [flags]\n\t    --verbose   say more\n\t`"
    result = edit_file(ws, "help.go", old, new)
    assert result.strategy == "ignoring indentation"
    assert (root / "help.go").read_text() == GO_HELP.replace("[flags]\n", "[flags]\n    --verbose   say more\n")


def test_tabs_written_as_spaces_become_tabs_again(ws: Workspace, root: Path) -> None:
    (root / "loop.go").write_text("func run() {\n\tfor {\n\t\tstep()\n\t}\n}\n")
    edit_file(ws, "loop.go", "    for {\n        step()\n    }", "    for {\n        step()\n        log()\n    }")
    assert (root / "loop.go").read_text() == "func run() {\n\tfor {\n\t\tstep()\n\t\tlog()\n\t}\n}\n"


def test_a_line_found_only_inside_another_is_refused_when_it_stands_alone_elsewhere(ws: Workspace, root: Path) -> None:
    # The over-indented old_text occurs verbatim only inside the comment; the line meant is the code below it.
    source = "def f():\n    #        total = 0\n    total = 0\n    return total\n"
    (root / "f.py").write_text(source)
    with pytest.raises(AmbiguousEdit, match=r"lines 2, 3"):
        edit_file(ws, "f.py", "        total = 0", "        total = 1")
    assert (root / "f.py").read_text() == source


def test_several_tolerant_matches_are_refused_with_their_lines(ws: Workspace, root: Path) -> None:
    source = "if a:\n    x = 1\nif b:\n        x = 1\n"
    (root / "g.py").write_text(source)
    with pytest.raises(AmbiguousEdit, match=r"lines 2, 4"):
        edit_file(ws, "g.py", "  x = 1", "  x = 2")
    assert (root / "g.py").read_text() == source


def test_a_tolerant_match_that_changes_nothing_is_refused(ws: Workspace, root: Path) -> None:
    # Spaces written for tabs in old_text, tabs in new_text: adapted to the file, the two are the same.
    source = "func run() {\n\tfor {\n\t\tstep()\n\t}\n}\n"
    (root / "loop.go").write_text(source)
    with pytest.raises(InvalidArgument, match="changes nothing"):
        edit_file(ws, "loop.go", "    for {\n        step()\n    }", "\tfor {\n\t\tstep()\n\t}")
    assert (root / "loop.go").read_text() == source


def test_not_found_in_a_large_file_is_quick_and_shows_the_closest_lines(ws: Workspace, root: Path) -> None:
    # 800 stale lines in a 10,000-line file took 92 s in pure Python; now well under a second. The bound is
    # generous (5 s) so that a slow CI machine cannot fail it; bench/time_edit_not_found.py measures it.
    lines = [f"    value_{n} = compute({n}, {n * 7 % 13})\n" for n in range(10_000)]
    (root / "big.py").write_text("".join(lines))
    stale = [line.replace("compute", "calc") if n % 3 == 0 else line for n, line in enumerate(lines[5000:5800])]
    started = time.perf_counter()
    with pytest.raises(EditNotFound) as caught:
        edit_file(ws, "big.py", "".join(stale), "x = 1\n")
    assert time.perf_counter() - started < 5
    assert "  5001\t    value_5000 = compute(5000, 4)" in str(caught.value)
