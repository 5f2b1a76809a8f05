"""code_outline and repo_map: one sample per language, then real files against universal-ctags (its recorded
definitions, and ctags itself when installed): CommonJS assignments, C++ headers named .h, Java annotations,
C definitions that tree-sitter's error recovery invents."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from warpcode.tools import UnsupportedLanguage, Workspace, code_outline, repo_map
from warpcode.tools.tag_cache import CACHE_NAME

CTAGS_DIR = Path(__file__).parent / "fixtures" / "ctags"
CTAGS = json.loads((CTAGS_DIR / "expected.json").read_text(encoding="utf-8"))
# What ctags tags and is no definition: locals it takes for globals inside functions assigned in a chain
# (`res.type = res.contentType = function`), a function it names after the object of the statement before, and an
# explicit template instantiation (`template class file_access<...>;` defines nothing new).
CTAGS_MISREADS = {
    ("express-request.js", "lc", 73),
    ("express-response.js", "ct", 507),
    ("express-response.js", "value", 670),
    ("express-response.js", "res", 699),
    ("fmt-ostream.h", "file_access", 47),
}

SAMPLES = {
    "m.py": (
        "X = 1\n\n@decorator\nclass Shape(Base):\n    def area(self):\n        return 0\n\n\ndef main():\n    pass\n",
        [("variable", "X", 1, 1), ("class", "Shape", 4, 6), ("method", "area", 5, 6), ("function", "main", 9, 10)],
    ),
    "m.js": (
        "class Shape {\n  area() { return 0; }\n}\nfunction main() {}\nconst helper = () => 1;\n",
        [("class", "Shape", 1, 3), ("method", "area", 2, 2), ("function", "main", 4, 4), ("function", "helper", 5, 5)],
    ),
    "m.ts": (
        "interface Named { name: string; }\ntype Id = number;\nenum Color { Red }\n"
        "class Shape implements Named {\n  name = 'x';\n  area(): number { return 0; }\n}\n",
        [
            ("interface", "Named", 1, 1),
            ("type", "Id", 2, 2),
            ("enum", "Color", 3, 3),
            ("class", "Shape", 4, 7),
            ("method", "area", 6, 6),
        ],
    ),
    "m.tsx": (
        "export function App(): JSX.Element {\n  return <div />;\n}\n",
        [("function", "App", 1, 3)],
    ),
    "m.go": (
        "package m\n\ntype Shape struct {\n\tw int\n}\n\ntype Namer interface {\n\tName() string\n}\n\n"
        "func (s *Shape) Area() int {\n\treturn s.w\n}\n\nfunc Main() {}\n",
        [
            ("struct", "Shape", 3, 5),
            ("interface", "Namer", 7, 9),
            ("method", "Area", 11, 13),
            ("function", "Main", 15, 15),
        ],
    ),
    "m.rs": (
        "pub struct Shape { w: i32 }\n\npub trait Area {\n    fn area(&self) -> i32;\n}\n\n"
        "impl Area for Shape {\n    fn area(&self) -> i32 { self.w }\n}\n\nfn main() {}\n",
        [
            ("struct", "Shape", 1, 1),
            ("trait", "Area", 3, 5),
            ("method", "area", 4, 4),
            ("impl", "Shape", 7, 9),
            ("method", "area", 8, 8),
            ("function", "main", 11, 11),
        ],
    ),
    "M.java": (
        "public class Shape {\n    public Shape() {}\n    int area() {\n        return 0;\n    }\n}\n"
        "interface Named {}\n",
        [
            ("class", "Shape", 1, 6),
            ("constructor", "Shape", 2, 2),
            ("method", "area", 3, 5),
            ("interface", "Named", 7, 7),
        ],
    ),
    "m.c": (
        "#define MAX 3\nstruct shape { int w; };\ntypedef int id_t;\n\n"
        "int area(struct shape *s) {\n    return s->w;\n}\n",
        [
            ("macro", "MAX", 1, 1),
            ("struct", "shape", 2, 2),
            ("field", "w", 2, 2),
            ("type", "id_t", 3, 3),
            ("function", "area", 5, 7),
        ],
    ),
    "m.cpp": (
        "namespace geo {\nclass Shape {\n public:\n  int area();\n};\n}\n\nint geo::Shape::area() {\n  return 0;\n}\n",
        [("namespace", "geo", 1, 6), ("class", "Shape", 2, 5), ("method", "area", 4, 4), ("method", "area", 8, 10)],
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_code_outline_per_language(ws: Workspace, root: Path, name: str) -> None:
    source, expected = SAMPLES[name]
    (root / name).write_text(source)
    outline = code_outline(ws, name)
    assert [(s.kind, s.name, s.start_line, s.end_line) for s in outline.symbols] == expected
    first_symbol_line = source.splitlines()[expected[0][2] - 1]
    assert outline.symbols[0].signature == first_symbol_line
    assert f"lines {expected[0][2]}-{expected[0][3]}" in outline.render()


def test_code_outline_refuses_unknown_languages(ws: Workspace, root: Path) -> None:
    (root / "notes.md").write_text("# hi\n")
    with pytest.raises(UnsupportedLanguage, match="read_file"):
        code_outline(ws, "notes.md")


def _repo(root: Path) -> None:
    files = {
        "core/db.py": "class Database:\n    def query_rows(self, sql):\n        return []\n",
        "core/util.py": "def format_rows(rows):\n    return str(rows)\n",
        "app/views.py": "from core.db import Database\n\ndef list_users():\n    return Database().query_rows('x')\n",
        "app/api.py": "from core.db import Database\n\ndef get_users():\n    return Database().query_rows('y')\n",
        "app/report.py": "from core.util import format_rows\n\ndef report():\n    return format_rows([])\n",
        "cli.py": "from app.views import list_users\n\ndef main_entry():\n    list_users()\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_repo_map_ranks_the_most_referenced_definitions_first(ws: Workspace, root: Path) -> None:
    _repo(root)
    result = repo_map(ws, max_tokens=1000)
    assert result.files == 6
    assert result.text.index("core/db.py") < result.text.index("core/util.py")
    assert "    1│class Database:" in result.text
    assert "    2│    def query_rows(self, sql):" in result.text


def test_repo_map_personalizes_to_focus_files(ws: Workspace, root: Path) -> None:
    _repo(root)
    focused = repo_map(ws, focus=["app/report.py"], max_tokens=1000)
    assert focused.text.startswith("core/util.py:")
    assert "app/report.py" not in focused.text  # focus files are already in the model's view


def test_repo_map_respects_the_token_budget(ws: Workspace, root: Path) -> None:
    calls = []
    for i in range(40):
        (root / f"mod{i}.py").write_text(f"def compute_value_{i}(x):\n    return x + {i}\n")
        calls.append(f"compute_value_{i}(1)")
    (root / "main.py").write_text("def main():\n    " + "\n    ".join(calls) + "\n")
    small = repo_map(ws, max_tokens=64)
    assert len(small.text) <= 64 * 4
    assert small.definitions_shown < repo_map(ws, max_tokens=4000).definitions_shown
    assert "raise max_tokens" in small.render()


def test_repo_map_tags_are_cached_by_mtime_and_size(ws: Workspace, root: Path) -> None:
    _repo(root)
    repo_map(ws)
    cache_file = ws.state_dir / CACHE_NAME
    cache = json.loads(cache_file.read_text())
    assert set(cache["files"]) == {
        "core/db.py",
        "core/util.py",
        "app/views.py",
        "app/api.py",
        "app/report.py",
        "cli.py",
    }
    # A warm run trusts entries whose key still matches: a planted name shows up without a re-parse.
    entry = cache["files"]["core/util.py"]
    entry[2][0][0][1] = "planted_name"
    entry[2][0][0][4] = "def planted_name(rows):"
    cache["files"]["app/report.py"][2][1] = {"planted_name": 1}
    cache_file.write_text(json.dumps(cache))
    assert "planted_name" in repo_map(ws).text
    # Touching a file changes its key, so it is parsed again.
    (root / "core" / "util.py").write_text("def format_rows(rows):\n    return repr(rows)\n\n")
    assert "planted_name" not in repo_map(ws).text


@pytest.fixture(scope="module")
def ctags_outlines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    root = tmp_path_factory.mktemp("ctags")
    for name in CTAGS["tags"]:
        shutil.copyfile(CTAGS_DIR / name, root / name)
    ws = Workspace(root)
    return {name: code_outline(ws, name).symbols for name in CTAGS["tags"]}


@pytest.mark.parametrize("name", sorted(CTAGS["tags"]))
def test_outline_has_every_definition_ctags_finds(ctags_outlines: dict[str, list], name: str) -> None:
    """Found: a definition of that name starting on ctags' line or up to two lines before it (a return type or
    template line), whose signature names it: `@Override` alone is no signature."""
    missed = []
    for tag_name, line, kind in CTAGS["tags"][name]:
        spelled = tag_name.replace(" ", "")  # ctags writes `operator =`
        if (name, tag_name, line) in CTAGS_MISREADS:
            continue
        if not any(
            symbol.name == tag_name
            and 0 <= line - symbol.start_line <= 2
            and line <= symbol.end_line
            and spelled in symbol.signature.replace(" ", "")
            for symbol in ctags_outlines[name]
        ):
            missed.append(f"{kind} {tag_name} (line {line})")
    assert not missed


@pytest.mark.skipif(shutil.which("ctags") is None, reason="universal-ctags is not installed")
def test_recorded_definitions_are_ctags_own() -> None:
    for name in ("express-utils.js", "fmt-args.h", "ObjectTypeAdapter.java", "curl-cf-dns.c"):
        done = subprocess.run(
            ["ctags", "--output-format=json", "--fields=+n", "-f", "-", name],
            cwd=CTAGS_DIR,
            capture_output=True,
            text=True,
            check=True,
        )
        live = {(tag["name"], tag["line"], tag["kind"]) for tag in map(json.loads, done.stdout.splitlines())}
        assert {tuple(tag) for tag in CTAGS["tags"][name]} <= live


def test_commonjs_assignments_are_definitions(ctags_outlines: dict[str, list]) -> None:
    symbols = {(s.kind, s.name): s for s in ctags_outlines["express-application.js"]}
    assert symbols["method", "listen"].signature == "app.listen = function listen() {"
    assert ("method", "handle") in symbols and ("variable", "app") in symbols
    view = {(s.kind, s.name) for s in ctags_outlines["express-view.js"]}
    assert {("method", "lookup"), ("method", "render"), ("function", "tryStat")} <= view
    utils = {(s.kind, s.name) for s in ctags_outlines["express-utils.js"]}
    assert ("method", "normalizeType") in utils  # exports.normalizeType = function(type)


def test_java_signatures_are_declarations_not_annotations(ctags_outlines: dict[str, list]) -> None:
    symbols = [
        s for name in ("JsonArray.java", "JsonPrimitive.java", "ObjectTypeAdapter.java") for s in ctags_outlines[name]
    ]
    assert not [s for s in symbols if s.signature.lstrip().startswith("@")]
    read = next(s for s in ctags_outlines["ObjectTypeAdapter.java"] if s.name == "read")
    assert read.signature == "  public Object read(JsonReader in) throws IOException {"


def test_c_headers_holding_cpp_are_outlined_as_cpp(ws: Workspace, root: Path) -> None:
    shutil.copyfile(CTAGS_DIR / "fmt-os.h", root / "os.h")
    shutil.copyfile(CTAGS_DIR / "redis-sds.h", root / "sds.h")
    cpp = code_outline(ws, "os.h")
    assert cpp.language == "cpp"
    assert {("class", "file"), ("class", "buffered_file"), ("namespace", "detail")} <= {
        (s.kind, s.name) for s in cpp.symbols
    }
    assert code_outline(ws, "sds.h").language == "c"


def test_no_definitions_named_by_keywords(ctags_outlines: dict[str, list]) -> None:
    """curl's cf-dns.c: an #ifdef between `}` and `else if (...) {` made tree-sitter read functions named `if`."""
    names = {s.name for symbols in ctags_outlines.values() for s in symbols}
    assert not names & {"if", "else", "switch", "while", "for", "return"}


def test_repo_map_of_a_commonjs_library_shows_its_methods(ws: Workspace, root: Path) -> None:
    (root / "lib").mkdir()
    for name in ("application", "request", "response", "view"):
        shutil.copyfile(CTAGS_DIR / f"express-{name}.js", root / "lib" / f"{name}.js")
    (root / "index.js").write_text("var app = require('./lib/application');\napp.listen(3000);\napp.render('x');\n")
    text = repo_map(ws, max_tokens=1024).text
    assert "app.listen = function listen() {" in text
    assert "app.render = function render(name, options, callback) {" in text
