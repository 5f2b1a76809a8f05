from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from warpcode.tools import (
    BinaryFile,
    FileNotFound,
    InvalidArgument,
    NotAFile,
    Workspace,
    edit_file,
    list_files,
    read_file,
    search,
    write_file,
)
from warpcode.tools.files import PAGE_LINES


def test_read_file_numbers_lines_and_honours_ranges(ws: Workspace, root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    view = read_file(ws, "a.txt", 2, 3)
    assert view.content == "     2\ttwo\n     3\tthree"
    assert (view.start_line, view.end_line, view.total_lines, view.note) == (2, 3, 4, "")


def test_read_file_pages_huge_files_and_says_how_to_continue(ws: Workspace, root: Path) -> None:
    (root / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 50_001)))
    first = read_file(ws, "big.txt")
    assert first.end_line == PAGE_LINES
    assert f"start_line={PAGE_LINES + 1}" in first.note
    second = read_file(ws, "big.txt", start_line=PAGE_LINES + 1)
    assert second.content.splitlines()[0] == f"{PAGE_LINES + 1:>6}\tline {PAGE_LINES + 1}"
    last = read_file(ws, "big.txt", 49_999)
    assert last.note == "" and last.end_line == 50_000


def test_read_file_cuts_very_long_lines(ws: Workspace, root: Path) -> None:
    (root / "min.js").write_text("x" * 10_000 + "\n")
    view = read_file(ws, "min.js")
    assert len(view.content) < 2_200
    assert "more characters" in view.content and "cut" in view.note


def test_read_file_errors_are_typed(ws: Workspace, root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "dir").mkdir()
    (root / "a.txt").write_text("a\n")
    with pytest.raises(BinaryFile, match="binary"):
        read_file(ws, "img.png")
    with pytest.raises(FileNotFound, match="list_files"):
        read_file(ws, "missing.txt")
    with pytest.raises(NotAFile):
        read_file(ws, "dir")
    with pytest.raises(InvalidArgument, match="past the end"):
        read_file(ws, "a.txt", 5)
    with pytest.raises(InvalidArgument):
        read_file(ws, "a.txt", 3, 2)


def test_binary_files_are_refused_for_edits(ws: Workspace, root: Path) -> None:
    data = b"\x00\x01binary\xff"
    (root / "blob.bin").write_bytes(data)
    with pytest.raises(BinaryFile):
        edit_file(ws, "blob.bin", "binary", "text")
    assert (root / "blob.bin").read_bytes() == data


def test_invalid_utf8_survives_an_edit_byte_for_byte(ws: Workspace, root: Path) -> None:
    original = b"caf\xe9 = 1\nname = '\xff\xfe'\nvalue = 2\n"
    (root / "latin.py").write_bytes(original)
    view = read_file(ws, "latin.py")
    assert "\ufffd" in view.content and "not UTF-8" in view.note
    edit_file(ws, "latin.py", "value = 2", "value = 3")
    assert (root / "latin.py").read_bytes() == original.replace(b"value = 2", b"value = 3")


def test_crlf_bom_and_missing_final_newline_are_preserved(ws: Workspace, root: Path) -> None:
    original = codecs.BOM_UTF8 + b"first\r\nsecond\r\nthird"
    (root / "win.txt").write_bytes(original)
    edit_file(ws, "win.txt", "second\nthird", "SECOND\nthird")
    assert (root / "win.txt").read_bytes() == codecs.BOM_UTF8 + b"first\r\nSECOND\r\nthird"
    write_file(ws, "win.txt", "a\nb\n")
    assert (root / "win.txt").read_bytes() == codecs.BOM_UTF8 + b"a\r\nb\r\n"


def test_mixed_line_endings_are_left_alone(ws: Workspace, root: Path) -> None:
    (root / "mixed.txt").write_bytes(b"a\r\nb\nc\r\n")
    edit_file(ws, "mixed.txt", "b", "B")
    assert (root / "mixed.txt").read_bytes() == b"a\r\nB\nc\r\n"


def test_write_file_creates_parents(ws: Workspace, root: Path) -> None:
    result = write_file(ws, "deep/er/new.txt", "hello\n")
    assert result.created
    assert (root / "deep/er/new.txt").read_text() == "hello\n"


def test_list_files_glob_and_limit(ws: Workspace, root: Path) -> None:
    for name in ["a.py", "src/b.py", "src/c.ts", "src/deep/d.py"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    assert list_files(ws, pattern="*.py").files == ["a.py", "src/b.py", "src/deep/d.py"]
    assert list_files(ws, "src", "*.ts").files == ["src/c.ts"]
    assert list_files(ws, pattern="src/*.py").files == ["src/b.py"]
    capped = list_files(ws, limit=2)
    assert capped.truncated and len(capped.files) == 2 and "narrow" in capped.render()


def test_list_files_takes_the_globs_of_search_as_ripgrep_reads_them(tmp_path: Path) -> None:
    """ripgrep's recorded selections on express's file names (fixtures/ripgrep_globs.json), `{a,b}` and `!`
    included: list_files and search take one glob syntax."""
    recorded = json.loads((Path(__file__).parent / "fixtures" / "ripgrep_globs.json").read_text(encoding="utf-8"))
    for rel in recorded["paths"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    ws = Workspace(tmp_path)
    for glob, selected in recorded["globs"].items():
        assert sorted(list_files(ws, pattern=glob, limit=10_000).files) == selected, glob


def test_list_files_reads_the_glob_from_its_directory(ws: Workspace, root: Path) -> None:
    for name in ["src/a.c", "src/a.h", "src/a.o", "src/tests/t.c", "tests/u.c"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    assert list_files(ws, "src", "*.{c,h}").files == ["src/a.c", "src/a.h", "src/tests/t.c"]
    assert list_files(ws, "src", "!tests/**").files == ["src/a.c", "src/a.h", "src/a.o"]


@pytest.mark.parametrize(("glob", "error"), [("*.{js", "unclosed '{'"), ("!", "names no files")])
def test_list_files_refuses_the_globs_search_refuses(ws: Workspace, glob: str, error: str) -> None:
    with pytest.raises(InvalidArgument, match=error):
        list_files(ws, pattern=glob)
    with pytest.raises(InvalidArgument, match=error):
        search(ws, "x", glob=glob)


def test_search_is_regex_ignore_aware_and_skips_binaries(ws: Workspace, root: Path) -> None:
    (root / ".gitignore").write_text("dist/\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("def alpha():\n    return beta()\n")
    (root / "dist").mkdir()
    (root / "dist" / "a.py").write_text("def alpha(): pass\n")
    (root / "data.bin").write_bytes(b"def alpha\x00")
    result = search(ws, r"def \w+\(")
    assert [(m.path, m.line, m.text) for m in result.matches] == [("src/a.py", 1, "def alpha():")]
    assert search(ws, "BETA", ignore_case=True).matches[0].line == 2
    assert search(ws, "alpha", glob="*.md").matches == []


def test_search_caps_results_with_a_note(ws: Workspace, root: Path) -> None:
    (root / "many.txt").write_text("hit\n" * 500)
    result = search(ws, "hit", max_matches=50)
    assert len(result.matches) == 50 and result.truncated
    assert "Stopped after 50 matches" in result.render()


def test_search_rejects_bad_regex(ws: Workspace) -> None:
    with pytest.raises(InvalidArgument, match="Invalid regular expression"):
        search(ws, "(unclosed")
