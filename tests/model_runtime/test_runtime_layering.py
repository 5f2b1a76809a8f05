"""The runtime's layering: importing `warpcode.model_runtime` and its torch-free parts (chat/, openai_server/,
speculative/, weight_formats.py) loads no torch; its public names still load on first use; and its sub-packages,
each counted as one module, import each other in one direction (function-local imports count: they hide a cycle,
they do not remove it): serving/ may import the decode path, not the other way round. tests/test_layering.py checks
the rest: no module cycle anywhere, nothing imported upward."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

import warpcode.model_runtime as runtime

REPO_ROOT = Path(__file__).resolve().parents[2]
TORCH_FREE = """
import pkgutil, sys
import warpcode.model_runtime, warpcode.model_runtime.chat, warpcode.model_runtime.openai_server
import warpcode.model_runtime.weight_formats, warpcode.model_runtime.speculative
for module in pkgutil.iter_modules(warpcode.model_runtime.chat.__path__):
    __import__(f"warpcode.model_runtime.chat.{module.name}")
print(sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "triton", "numpy")))
"""


def test_the_runtime_and_its_torch_free_parts_import_no_torch() -> None:
    done = subprocess.run([sys.executable, "-c", TORCH_FREE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_public_name_loads_from_its_module() -> None:
    from warpcode.model_runtime import load, load_random  # the runtime's entry points, kept by name
    from warpcode.model_runtime.engine import load as engine_load

    assert load is engine_load and callable(load_random)
    assert sorted(dir(runtime)) == sorted(runtime.__all__)
    for name in runtime.__all__:
        assert getattr(getattr(runtime, name), "__name__", name) == name  # PRESETS is a dict
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        runtime.not_a_name  # noqa: B018


def module_imports(folder: str, package: str) -> dict[str, set[str]]:
    """Module -> the warpcode modules it imports anywhere in its body, for every module under `folder`."""
    files = {}
    for path in (REPO_ROOT / folder).rglob("*.py"):
        parts = path.relative_to(REPO_ROOT / folder).with_suffix("").parts
        files[".".join([package, *(p for p in parts if p != "__init__")])] = path
    graph = {}
    for name, path in files.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from package import module` imports the module; `from module import name` the module
                imported |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                             for a in node.names}  # fmt: skip
        graph[name] = {module for module in imported if module.startswith("warpcode.")}
    return graph


def without_cycles(graph: dict[str, set[str]]) -> None:
    inside = {name: {m for m in imported if m in graph and m != name} for name, imported in graph.items()}
    try:
        graphlib.TopologicalSorter(inside).prepare()
    except graphlib.CycleError as cycle:
        pytest.fail(f"import cycle: {' imports '.join(reversed(cycle.args[1]))}")  # graphlib lists dependencies first


def test_no_import_cycles_in_the_runtime_with_its_subpackages_as_units() -> None:
    graph = module_imports("model_runtime", "warpcode.model_runtime")
    folders = {path.name for path in (REPO_ROOT / "model_runtime").iterdir() if (path / "__init__.py").is_file()}
    subpackages = {f"warpcode.model_runtime.{folder}" for folder in folders}

    def unit(module: str) -> str:
        return next((p for p in subpackages if module.startswith(f"{p}.")), module)

    units: dict[str, set[str]] = {}
    for name, imported in graph.items():
        units.setdefault(unit(name), set()).update(unit(m) for m in imported)
    without_cycles(units)
