"""The layers of warpcode.agent, read from the source (every import counts, a function's own included: it runs
sooner or later): the command line is a leaf that nothing imports, and no modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

AGENT = Path(__file__).resolve().parents[2] / "agent"
PACKAGE = "warpcode.agent"
CLI = f"{PACKAGE}.cli"
RUNS_THE_CLI = {f"{PACKAGE}.__main__"}  # `python -m warpcode.agent`


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(AGENT.rglob("*.py")):
        parts = [part for part in path.relative_to(AGENT).with_suffix("").parts if part != "__init__"]
        modules[".".join([PACKAGE, *parts])] = path
    return modules


def _imports(name: str, source: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The modules of warpcode.agent that module `name` imports: `from P import M` is the module P.M when there is
    one, else P itself."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
    return {target for target in found if target in modules and target != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: _imports(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", modules)
        for name, path in modules.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return components


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_nothing_outside_the_command_line_imports_it() -> None:
    graph = _graph()
    assert CLI in graph, "warpcode.agent.cli not found: the test reads the wrong folder"
    upward = {
        f"{name} -> {target}"
        for name, targets in graph.items()
        if not _within(name, CLI) and name not in RUNS_THE_CLI
        for target in targets
        if _within(target, CLI)
    }
    assert not upward, f"imports of the command line from below it (move what they need out of cli/): {upward}"


def test_no_modules_import_each_other_in_a_circle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles in warpcode.agent: {cycles}"


def test_the_reader_sees_function_local_and_relative_imports() -> None:
    """The checks above are only as good as the import reader: a function's own import and a relative one count."""
    source = (
        "def f():\n    from warpcode.agent.cli import main\n\nfrom .. import loop\nfrom .results import ResultsFile\n"
    )
    names = ("warpcode.agent.cli", "warpcode.agent.loop", "warpcode.agent.batch.results")
    modules = {name: Path() for name in names}
    assert _imports("warpcode.agent.batch.example", source, False, modules) == set(names)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
