"""Where a made-up repository puts its files: the file layouts, split between training and held-out tasks.

A layout is four choices: where the modules live (at the root, in a package, in a package's sub-package with the
configuration one level up, or in a package under src/), one test file per module or one for the whole project,
how pytest learns where the modules are (pyproject.toml, pytest.ini or a conftest.py), and whether the package's
modules import each other absolutely or relatively. Whole combinations are held out (a hash of the combination picks
them), so every single choice is seen in training while the held-out combinations never are.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from warpcode.training.tasks.words import split_of

ROOTS = ("flat", "package", "nested", "src")
TESTS = ("per_module", "single")
PYTEST_CONFIGS = ("pyproject", "ini", "conftest")
IMPORTS = ("absolute", "relative")


@dataclass(frozen=True)
class Layout:
    root: str
    tests: str
    pytest_config: str
    imports: str

    @property
    def signature(self) -> str:
        return f"{self.root}/{self.tests}/{self.pytest_config}/{self.imports}"

    @property
    def import_root(self) -> str:
        """The folder that must be on sys.path to import the project's modules."""
        return "src" if self.root == "src" else "."


def _all_layouts() -> tuple[Layout, ...]:
    combos = itertools.product(ROOTS, TESTS, PYTEST_CONFIGS, IMPORTS)
    return tuple(Layout(*combo) for combo in combos if not (combo[0] == "flat" and combo[3] == "relative"))


LAYOUTS = _all_layouts()


def layouts(split: str) -> tuple[Layout, ...]:
    return tuple(layout for layout in LAYOUTS if split_of(layout.signature) == split)


@dataclass(frozen=True)
class Places:
    """One repository's names for its folders: `package` (unused by the flat layout) and `sub` (nested only)."""

    layout: Layout
    project: str
    package: str
    sub: str

    def module_path(self, module: str, config: bool = False) -> str:
        return "/".join([*self._folders(config), f"{module}.py"])

    def dotted(self, module: str, config: bool = False) -> str:
        """The absolute import path of a module."""
        folders = self._folders(config)
        return ".".join([*(folders[1:] if self.layout.root == "src" else folders), module])

    def relative(self, module: str, config: bool = False) -> str:
        """The relative import path of `module` from a regular module of the package (those of the nested layout
        sit one level below the configuration module)."""
        if self.layout.root == "nested" and config:
            return f"..{module}"
        return f".{module}"

    def package_inits(self) -> list[str]:
        root = self.layout.root
        if root == "flat":
            return []
        base = "src/" if root == "src" else ""
        inits = [f"{base}{self.package}/__init__.py"]
        if root == "nested":
            inits.append(f"{self.package}/{self.sub}/__init__.py")
        return inits

    def _folders(self, config: bool) -> list[str]:
        root = self.layout.root
        if root == "flat":
            return []
        if root == "src":
            return ["src", self.package]
        if root == "nested" and not config:
            return [self.package, self.sub]
        return [self.package]

    def pytest_files(self) -> dict[str, str]:
        """The file that puts the modules on pytest's sys.path, as this layout does it."""
        where, config = self.layout.import_root, self.layout.pytest_config
        if config == "pyproject":
            text = (
                f'[project]\nname = "{self.project}"\nversion = "0.1.0"\n\n'
                f'[tool.pytest.ini_options]\npythonpath = ["{where}"]\ntestpaths = ["tests"]\n'
            )
            return {"pyproject.toml": text}
        if config == "ini":
            return {"pytest.ini": f"[pytest]\npythonpath = {where}\ntestpaths = tests\n"}
        if where == "src":
            text = (
                '"""Puts src/ on sys.path so that the tests import the package."""\n\nimport sys\n'
                "from pathlib import Path\n\n"
                'sys.path.insert(0, str(Path(__file__).parent / "src"))\n'
            )
        else:
            text = '"""pytest puts this folder, which holds the modules, on sys.path."""\n'
        return {"conftest.py": text}
