"""Where apply_patch puts a hunk written the way models write them: line numbers shifted, "@@ -0,0 +0,0 @@" or a
bare "@@", context with its indentation stripped, context that repeats in the file. The right place is known;
a hunk whose place the file and its numbers do not decide is refused with the candidates, never guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpcode.tools import PatchError, Workspace, apply_patch

# Two functions with the same body: a hunk quoting only their body matches both.
TWIN = "def {name}(items):\n    total = 0\n    for item in items:\n        total += item\n    return total\n\n\n"
SOURCE = "import os\n\n\n" + TWIN.format(name="first") + TWIN.format(name="second") + "print(first([1]))\n"
BODY = (
    "@@ -{start},4 +{start},4 @@\n     total = 0\n     for item in items:\n"
    "-        total += item\n+        total += 2 * item\n     return total\n"
)


def _second_changed() -> str:
    head, _, tail = SOURCE.partition("def second")
    return head + "def second" + tail.replace("total += item", "total += 2 * item", 1)


def _patch(header_and_body: str) -> str:
    return "--- a/m.py\n+++ b/m.py\n" + header_and_body


@pytest.mark.parametrize(
    "header",
    ["@@ -0,0 +0,0 @@", "@@", "@@ -30,4 +30,4 @@", "@@ -1,4 +1,4 @@"],
    ids=["zeros", "bare", "far", "near-first"],
)
def test_repeated_context_without_deciding_numbers_is_refused_with_the_candidates(root: Path, header: str) -> None:
    (root / "m.py").write_text(SOURCE)
    body = BODY.format(start=1).split("\n", 1)[1]
    with pytest.raises(PatchError, match=r"match 2 places \(starting at lines 5, 12\)"):
        apply_patch(Workspace(root), _patch(f"{header}\n{body}"))
    assert (root / "m.py").read_text() == SOURCE


def test_line_numbers_that_point_at_one_of_the_places_decide(root: Path) -> None:
    (root / "m.py").write_text(SOURCE)
    apply_patch(Workspace(root), _patch(BODY.format(start=12)))
    assert (root / "m.py").read_text() == _second_changed()


def test_stripped_indentation_matching_verbatim_elsewhere_is_ambiguous(root: Path) -> None:
    # The model may mean the indented lines 3-4, written unindented; lines 6-7 hold them verbatim.
    source = "class A:\n    def f(self):\n        x = 1\n        return x\n\nx = 1\nreturn x\n"
    (root / "m.py").write_text(source)
    patch = _patch("@@\n x = 1\n-return x\n+return x + 1\n")
    with pytest.raises(PatchError, match="places"):
        apply_patch(Workspace(root), patch)
    unique = _patch("@@\n def f(self):\n x = 1\n-        return x\n+        return x + 1\n")
    result = apply_patch(Workspace(root), unique)
    assert (root / "m.py").read_text() == source.replace("        return x\n", "        return x + 1\n")
    assert "ignoring" in result.changes[0].notes[0]


def test_no_newline_marker_applies_only_at_the_end_of_the_file(root: Path) -> None:
    source = "end\nmiddle\nend\nlast\nend"
    (root / "f.txt").write_text(source)
    patch = "--- a/f.txt\n+++ b/f.txt\n@@\n-end\n\\ No newline at end of file\n+END\n\\ No newline at end of file\n"
    apply_patch(Workspace(root), patch)
    assert (root / "f.txt").read_text() == "end\nmiddle\nend\nlast\nEND"


def test_no_newline_marker_is_refused_when_the_file_does_not_end_there(root: Path) -> None:
    (root / "f.txt").write_text("keep\nlast\nmore\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n keep\n-last\n+LAST\n\\ No newline at end of file\n"
    with pytest.raises(PatchError):
        apply_patch(Workspace(root), patch)
    assert (root / "f.txt").read_text() == "keep\nlast\nmore\n"


def test_an_addition_without_context_or_numbers_is_refused(root: Path) -> None:
    (root / "f.txt").write_text("a\nb\n")
    with pytest.raises(PatchError, match="no line numbers"):
        apply_patch(Workspace(root), "--- a/f.txt\n+++ b/f.txt\n@@\n+new\n")
    assert (root / "f.txt").read_text() == "a\nb\n"


def test_a_hunk_longer_than_its_counts_is_refused_not_cut(root: Path) -> None:
    (root / "f.txt").write_text("a\nb\nc\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n-c\n+C\n"
    with pytest.raises(PatchError, match="more '\\+'/'-' lines than its header counts"):
        apply_patch(Workspace(root), patch)
    assert (root / "f.txt").read_text() == "a\nb\nc\n"
