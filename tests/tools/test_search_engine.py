"""search on RE2: hostile patterns run in linear time; what RE2 cannot express is refused with a hint; lines
match as in ripgrep (its recorded answers on real files, and ripgrep itself when installed); globs take
ripgrep's `{a,b}` and `!`; Python environments are skipped by their pyvenv.cfg or conda-meta/, not by their
name."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpcode.tools import InvalidArgument, Workspace, search

FIXTURES = Path(__file__).parent / "fixtures"
RIPGREP = json.loads((FIXTURES / "ripgrep" / "expected.json").read_text(encoding="utf-8"))
GLOBS = json.loads((FIXTURES / "ripgrep_globs.json").read_text(encoding="utf-8"))


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


def test_matches_per_line_unless_the_pattern_spells_a_line_break(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1  # x x\r\ny = 2\ndef f():\n    return x\n")
    assert [(m.line, m.text) for m in search(ws, "x").matches] == [(1, "x = 1  # x x"), (4, "    return x")]
    assert [m.line for m in search(ws, r"^def").matches] == [3]
    assert [m.line for m in search(ws, r"x\r?$").matches] == [1, 4]
    assert [m.line for m in search(ws, r"\s+$").matches] == [1]  # the \r; no line's \n runs into the next
    assert [m.line for m in search(ws, r"(?s)y = .*return").matches] == []  # `.` stays on its line, as in ripgrep
    assert [m.line for m in search(ws, r"[^#]*return").matches] == [4]
    assert [m.line for m in search(ws, r"2\ndef").matches] == [2]  # `\n` spelled out: the match spans lines
    assert [m.line for m in search(ws, r"y = 2\n(?s:.*)return").matches] == [2]


def test_a_final_line_break_starts_no_empty_line(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n\nb\n")
    (tmp_path / "empty.txt").write_text("")
    assert [(m.path, m.line) for m in search(ws, r"^$").matches] == [("a.txt", 2)]
    assert [m.line for m in search(ws, r"\Ab|a\z").matches] == [1, 3]  # \A and \z: the ends of each line


@pytest.fixture(scope="module")
def ripgrep_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ripgrep")
    for name in RIPGREP["files"]:
        shutil.copyfile(FIXTURES / "ripgrep" / name, folder / name)
    return folder


def _lines_by_file(root: Path, pattern: str, ignore_case: bool) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for match in search(Workspace(root), pattern, ignore_case=ignore_case, max_matches=100_000).matches:
        found.setdefault(match.path, []).append(match.line)
    return found


@pytest.mark.parametrize("answer", RIPGREP["answers"], ids=lambda a: f"/{a['pattern']}/{'i' * a['ignore_case']}")
def test_line_sets_equal_ripgreps_on_real_files(ripgrep_files: Path, answer: dict) -> None:
    """Real files (CRLF, a BOM, no final newline, tabs, CJK and box drawing, full-width digits, Latin-1 bytes)
    and ripgrep 13's answers, recorded by bench/search_vs_ripgrep.py --record."""
    assert _lines_by_file(ripgrep_files, answer["pattern"], answer["ignore_case"]) == answer["lines"]


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")
def test_recorded_answers_are_ripgreps_own(ripgrep_files: Path) -> None:
    for answer in RIPGREP["answers"][:: max(1, len(RIPGREP["answers"]) // 12)]:
        flags = ["-i"] if answer["ignore_case"] else []
        done = subprocess.run(
            ["rg", "--no-config", "-n", "-H", "--no-heading", "--null", *flags, "-e", answer["pattern"], "--"]
            + RIPGREP["files"],
            cwd=ripgrep_files,
            capture_output=True,
            check=False,
        )
        live: dict[str, list[int]] = {}
        for record in done.stdout.splitlines():
            name, _, rest = record.partition(b"\0")
            live.setdefault(name.decode(), []).append(int(rest.split(b":", 1)[0]))
        assert live == answer["lines"], answer["pattern"]


@pytest.fixture(scope="module")
def express_tree(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """express's file names (contents do not matter to a glob), each file holding one matching line."""
    root = tmp_path_factory.mktemp("express")
    for rel in GLOBS["paths"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("needle\n")
    return Workspace(root)


@pytest.mark.parametrize("glob", sorted(GLOBS["globs"]))
def test_globs_select_the_files_ripgrep_selects(express_tree: Workspace, glob: str) -> None:
    found = {match.path for match in search(express_tree, "needle", glob=glob, max_matches=10_000).matches}
    assert sorted(found) == GLOBS["globs"][glob]


def test_globs_follow_gitignore_where_ripgrep_selects_nothing(express_tree: Workspace) -> None:
    """A directory selects what is under it, as a .gitignore line would ignore it (ripgrep selects nothing)."""
    in_lib = {match.path for match in search(express_tree, "needle", glob="lib", max_matches=10_000).matches}
    assert in_lib == {path for path in GLOBS["paths"] if path.startswith("lib/") or "/lib/" in path}


@pytest.mark.parametrize(
    ("glob", "error"), [("*.{js", "unclosed '{'"), ("!", "names no files"), ("{a,b}" * 9, "alternatives")]
)
def test_globs_that_cannot_work_are_refused(ws: Workspace, glob: str, error: str) -> None:
    with pytest.raises(InvalidArgument, match=error):
        search(ws, "x", glob=glob)


def test_nested_alternatives_and_names_that_look_like_gitignore_syntax(ws: Workspace, tmp_path: Path) -> None:
    for name in ("a.json", "b.md", "c.txt", "#notes.txt", "!bang.txt"):
        (tmp_path / name).write_text("needle\n")
    assert {m.path for m in search(ws, "needle", glob="*.{json,{md,txt}}").matches} == {
        "a.json", "b.md", "c.txt", "#notes.txt", "!bang.txt"
    }  # fmt: skip
    assert {m.path for m in search(ws, "needle", glob="{#,!}*").matches} == {"#notes.txt", "!bang.txt"}


def test_a_glob_selecting_no_file_says_so(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("needle\n")
    assert "matches the glob '*.c,*.h'" in search(ws, "needle", glob="*.c,*.h").render()


def test_virtual_environments_are_skipped_by_what_they_are_not_by_name(ws: Workspace, tmp_path: Path) -> None:
    files = {
        "Lib/venv/__init__.py": "needle",  # CPython's own venv package
        "venv/scripts/activate.py": "needle",  # a folder named venv that is no environment
        "env/pyvenv.cfg": "home = /usr/bin",
        "env/lib/python3.12/site-packages/pkg.py": "needle",
        ".venv/pyvenv.cfg": "home = /usr/bin",
        ".venv/lib/mod.py": "needle",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text + "\n")
    assert {m.path for m in search(ws, "needle").matches} == {"Lib/venv/__init__.py", "venv/scripts/activate.py"}
    assert ws.is_ignored("env/lib/python3.12/site-packages/pkg.py") and not ws.is_ignored("Lib/venv/__init__.py")


def test_conda_environments_are_skipped_by_their_conda_meta(ws: Workspace, tmp_path: Path) -> None:
    files = {
        "envs/ml/conda-meta/history": "==> 2024-05-01 10:00:00 <==",  # `conda create -p envs/ml`
        "envs/ml/lib/python3.12/site-packages/pkg.py": "needle",
        ".pixi/envs/default/conda-meta/pixi": "{}",  # pixi's environments are conda ones
        ".pixi/envs/default/lib/mod.py": "needle",
        "src/conda_meta.py": "needle",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text + "\n")
    assert {m.path for m in search(ws, "needle").matches} == {"src/conda_meta.py"}
    assert ws.is_ignored("envs/ml/lib/python3.12/site-packages/pkg.py") and not ws.is_ignored("src/conda_meta.py")


def test_non_utf8_bytes_do_not_stop_the_scan(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 needle\nneedle two\n")
    assert [(m.line, m.text) for m in search(ws, "needle").matches] == [(1, "caf\ufffd needle"), (2, "needle two")]
