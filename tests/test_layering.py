"""Imports go downward only, and never in a circle.

The packages stack up as the design draws them:

    agent -> {tools, model_runtime};  model_runtime -> kernels;  tools, kernels -> no other warpcode package;
    bench -> anything (and only the CLI's `bench` command, agent/cli/bench.py, imports bench);
    training -> anything (and nothing imports it: it makes the built-in model, the product only loads it);
    nothing imports experiments/ or tests/; agent/cli is a leaf (only agent/__main__.py imports it);
    torch and triton are imported by model_runtime, kernels, bench and training alone.

The graph is read from the source with `ast`, not from what one run happens to import: an import inside a function
counts like one at the top of the file (it runs on some call, and hiding a cycle in a function is how cycles
survive). `import a.b` and `from a import b` both resolve to the module a.b when it exists, else to the package a.
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Which warpcode packages each package may import (its own modules always).
MAY_IMPORT = {
    "agent": {"tools", "model_runtime"},
    "model_runtime": {"kernels"},
    "tools": set(),
    "kernels": set(),
    "bench": {"agent", "tools", "model_runtime", "kernels"},
    "training": {"agent", "tools", "model_runtime", "kernels"},
}
BENCH_COMMAND = "warpcode.agent.cli.bench"  # the one module outside bench/ that may import warpcode.bench
CLI = "warpcode.agent.cli"
CLI_ENTRY = "warpcode.agent.__main__"  # `python -m warpcode.agent` runs the CLI
HEAVY = {"torch", "triton"}
MAY_IMPORT_HEAVY = {"model_runtime", "kernels", "bench", "training"}
NEVER_IMPORTED = {"tests", "experiments"}  # checkouts' folders, not shipped: a shipped module cannot import them


@dataclass
class Module:
    name: str
    path: str  # relative to the checkout, for messages
    imports: dict[str, int] = field(default_factory=dict)  # warpcode module -> line of its first import
    outside: dict[str, int] = field(default_factory=dict)  # top-level name of any other import -> line


def source_packages(root: Path) -> dict[str, Path]:
    """warpcode package -> its folder, from pyproject's package-dir (one namespace over several folders)."""
    package_dir = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {package: root / folder for package, folder in package_dir.items()}


def module_names(packages: dict[str, Path]) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__)."""
    names = {}
    for package, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            is_init = parts[-1] == "__init__"
            names[".".join([package, *(parts[:-1] if is_init else parts)])] = (path, is_init)
    return names


def resolve(dotted: str, known: dict) -> str | None:
    """The longest prefix of `dotted` that is one of our modules (`import a.b.c` runs a.b.c, or a.b's __init__)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def import_graph(root: Path) -> dict[str, Module]:
    names = module_names(source_packages(root))
    graph = {}
    for name, (path, is_init) in names.items():
        module = Module(name, path.relative_to(root).as_posix())
        here = name.split(".") if is_init else name.split(".")[:-1]  # the package a relative import starts from
        found: list[tuple[str, int]] = []  # (dotted name, line)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):  # every import, at any depth
            if isinstance(node, ast.Import):
                found += [(alias.name, node.lineno) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here[: len(here) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                # `from a import b`: the module a.b when b is one, else a name in a (the module a)
                found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
        for dotted, line in sorted(found, key=lambda item: item[1]):
            target = resolve(dotted, names)
            if target and target != name:
                module.imports.setdefault(target, line)
            elif not target and not dotted.startswith("warpcode."):
                module.outside.setdefault(dotted.split(".")[0], line)
        graph[name] = module
    return graph


def package_of(name: str) -> str:
    return name.split(".")[1]


def where(module: Module, line: int) -> str:
    return f"{module.path}:{line}"


def upward_imports(graph: dict[str, Module]) -> dict[str, str]:
    """Violation -> where it happens, for every import across packages that the layering does not allow."""
    found = {}
    for module in graph.values():
        source = package_of(module.name)
        for target, line in module.imports.items():
            allowed = package_of(target) in MAY_IMPORT[source] | {source}
            if package_of(target) == "bench":
                allowed = source == "bench" or module.name == BENCH_COMMAND
            if not allowed:
                found[f"{module.name} imports {target} ({source} may not import {package_of(target)})"] = where(
                    module, line
                )
        for name, line in module.outside.items():
            if name in NEVER_IMPORTED:
                found[f"{module.name} imports {name} (a checkout's folder, not shipped)"] = where(module, line)
            if name in HEAVY and source not in MAY_IMPORT_HEAVY:
                found[f"{module.name} imports {name}"] = where(module, line)
    return found


def cli_imports(graph: dict[str, Module]) -> dict[str, str]:
    """The CLI is a leaf: argparse and the terminal over the rest, which never builds anything through it."""
    found = {}
    for module in graph.values():
        if module.name == CLI_ENTRY or module.name == CLI or module.name.startswith(CLI + "."):
            continue
        for target, line in module.imports.items():
            if target == CLI or target.startswith(CLI + "."):
                found[f"{module.name} imports the CLI ({target})"] = where(module, line)
    return found


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the groups of two or more modules that all reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return sorted(groups)


def shortest_cycle(edges: dict[str, set[str]], group: list[str]) -> list[str]:
    """One concrete loop through the group's first module (breadth first, so the shortest)."""
    start, members = group[0], set(group)
    came_from = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(edges[node] & members):
            if successor == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    raise AssertionError(f"{group} is not a cycle")


def cycles(graph: dict[str, Module]) -> dict[str, str]:
    """Violation -> one loop of the group, each step with the line that imports (function-local ones included)."""
    edges = {name: set(module.imports) for name, module in graph.items()}
    found = {}
    for group in strongly_connected(edges):
        loop = shortest_cycle(edges, group)
        steps = [f"{a} -> {b} ({where(graph[a], graph[a].imports[b])})" for a, b in itertools.pairwise(loop)]
        found[f"cycle among {', '.join(group)}"] = "; ".join(steps)
    return found


def imports_of_test_modules(root: Path) -> dict[str, str]:
    """Test modules and conftests are pytest's to import, each once and in its own way: a test module that imports
    another runs (and collects) that module's tests again under a second name, and one that imports a conftest gets
    fixtures pytest does not manage. What tests share lives in plain helper modules."""
    found = {}
    for path in sorted((root / "tests").rglob("*.py")):
        relative = path.relative_to(root)
        package = list(relative.parent.parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                dotted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package[: len(package) - (node.level - 1)], *([base] if base else [])])
                dotted = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for name in dotted:
                last = name.split(".")[-1]
                if name.split(".")[0] == "tests" and (last == "conftest" or last.startswith("test_")):
                    violation = f"{relative.as_posix()} imports {name}"
                    line = min(node.lineno, int(found.get(violation, f":{node.lineno}").rsplit(":", 1)[1]))
                    found[violation] = f"{relative.as_posix()}:{line}"
    return found


def report(found: dict[str, str], rule: str) -> str:
    lines = [f"  {violation}  [{place}]" for violation, place in sorted(found.items())]
    return f"{rule}:\n" + "\n".join(lines)


GRAPH = import_graph(REPO_ROOT)


def test_the_graph_covers_every_package():
    assert {package_of(name) for name in GRAPH} == set(MAY_IMPORT)
    assert len(GRAPH) > 100 and sum(len(module.imports) for module in GRAPH.values()) > 200


def test_packages_import_downward_only():
    found = upward_imports(GRAPH)
    assert not found, report(found, "imports that run upward (agent -> {tools, model_runtime} -> kernels)")


def test_the_cli_is_a_leaf():
    found = cli_imports(GRAPH)
    assert not found, report(found, f"only {CLI_ENTRY} imports {CLI}; move what they need out of the CLI")


def test_no_module_imports_in_a_circle():
    found = cycles(GRAPH)
    assert not found, report(found, "import cycles (break them by moving the shared part into a module of its own)")


def test_tests_share_helper_modules_not_tests_or_conftests():
    found = imports_of_test_modules(REPO_ROOT)
    assert not found, report(found, "imports of a test module or a conftest (move what they share to a helper module)")


# What a fresh interpreter loads, beyond the static graph: the tools and the agent's toolbox (what a tool benchmark
# or an editor's service loads) stay light, without the runtime at all; the runtime's package itself loads no torch.
TOOLS_SIDE = "warpcode.tools, warpcode.bench.tools, warpcode.agent.toolbox"
LOADED = """
import sys
import {modules}
print(sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "triton", "numpy")
             or name.startswith({forbidden})))
"""


@pytest.mark.parametrize(
    ("modules", "forbidden"),
    [(TOOLS_SIDE, ("warpcode.model_runtime", "warpcode.kernels")), ("warpcode.model_runtime", ())],
    ids=["tools-side", "model_runtime"],
)
def test_light_packages_import_no_torch(modules, forbidden):
    code = LOADED.format(modules=modules, forbidden=forbidden)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"`import {modules}` loads {done.stdout.strip()}"


# The checker itself, on small trees made for each rule: it must see what it is there to see.


def synthetic_tree(root: Path, files: dict[str, str]) -> dict[str, Module]:
    package_dir = ", ".join(f'"warpcode.{folder}" = "{folder}"' for folder in MAY_IMPORT)
    (root / "pyproject.toml").write_text(f"[tool.setuptools]\npackage-dir = {{ {package_dir} }}\n")
    for folder in MAY_IMPORT:
        (root / folder).mkdir()
        (root / folder / "__init__.py").write_text("")
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return import_graph(root)


def test_the_checker_sees_upward_imports(tmp_path):
    graph = synthetic_tree(
        tmp_path,
        {
            "kernels/gemv.py": "def run():\n    from warpcode.model_runtime import engine\n",
            "model_runtime/engine.py": "import warpcode.kernels.gemv\n",
            "tools/edit.py": "from warpcode.agent import loop\n",
            "agent/loop.py": "from warpcode.bench.timing import clock\nimport torch\n",
            "agent/cli/bench.py": "from warpcode.bench import timing\n",
            "bench/timing.py": "from warpcode.agent.cli import bench\nfrom experiments import sweep\n",
        },
    )
    assert sorted(upward_imports(graph)) == [
        "warpcode.agent.loop imports torch",
        "warpcode.agent.loop imports warpcode.bench.timing (agent may not import bench)",
        "warpcode.bench.timing imports experiments (a checkout's folder, not shipped)",
        "warpcode.kernels.gemv imports warpcode.model_runtime.engine (kernels may not import model_runtime)",
        "warpcode.tools.edit imports warpcode.agent.loop (tools may not import agent)",
    ]
    assert upward_imports(graph)["warpcode.kernels.gemv imports warpcode.model_runtime.engine (kernels may not "
                                  "import model_runtime)"] == "kernels/gemv.py:2"  # fmt: skip
    assert list(cli_imports(graph)) == ["warpcode.bench.timing imports the CLI (warpcode.agent.cli.bench)"]


def test_the_checker_sees_a_cycle_hidden_in_a_function(tmp_path):
    graph = synthetic_tree(
        tmp_path,
        {
            "agent/backends/__init__.py": "",
            "agent/backends/base.py": "def make():\n    from .local import Local\n",
            "agent/backends/local.py": "from warpcode.agent.backends import base\n",
            "agent/loop.py": "from warpcode.agent.backends import local\n",
        },
    )
    assert cycles(graph) == {
        "cycle among warpcode.agent.backends.base, warpcode.agent.backends.local": (
            "warpcode.agent.backends.base -> warpcode.agent.backends.local (agent/backends/base.py:2); "
            "warpcode.agent.backends.local -> warpcode.agent.backends.base (agent/backends/local.py:1)"
        )
    }


def test_the_checker_resolves_relative_imports(tmp_path):
    graph = synthetic_tree(
        tmp_path,
        {
            "model_runtime/serving/__init__.py": "from . import scheduler\n",
            "model_runtime/serving/scheduler.py": "from ..engine import Engine\nfrom .. import config\n",
            "model_runtime/engine.py": "from .serving.scheduler import Scheduler\n",
            "model_runtime/config.py": "",
            "tools/patch.py": "from ..agent.loop import run\n",  # from outside the package: still upward
            "agent/loop.py": "",
        },
    )
    assert set(graph["warpcode.model_runtime.serving"].imports) == {"warpcode.model_runtime.serving.scheduler"}
    assert set(graph["warpcode.model_runtime.serving.scheduler"].imports) == {
        "warpcode.model_runtime.engine",
        "warpcode.model_runtime.config",
    }
    cycle = "cycle among warpcode.model_runtime.engine, warpcode.model_runtime.serving.scheduler"
    assert list(cycles(graph)) == [cycle]
    upward = "warpcode.tools.patch imports warpcode.agent.loop (tools may not import agent)"
    assert list(upward_imports(graph)) == [upward]


def test_the_checker_sees_tests_importing_tests_and_conftests(tmp_path):
    files = {
        "tests/conftest.py": "",
        "tests/agent/helpers.py": "",
        "tests/agent/test_a.py": "from .test_b import f\nfrom tests.agent import helpers\nfrom . import test_b\n",
        "tests/agent/test_c.py": "def test():\n    from tests.conftest import process_running\n",
        "tests/agent/test_b.py": "from tests.agent.helpers import shared\nfrom .helpers import other\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert imports_of_test_modules(tmp_path) == {
        "tests/agent/test_a.py imports tests.agent.test_b": "tests/agent/test_a.py:1",
        "tests/agent/test_c.py imports tests.conftest": "tests/agent/test_c.py:2",
    }
