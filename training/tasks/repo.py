"""A made-up Python repository: a few modules of small functions, maybe a configuration module, pytest tests, and the
files that let pytest import the modules, laid out as its Layout says.

The repository is kept as a model (modules, functions, constants, tests) and written out as text by `files()`, so a
task can break one thing in it (a wrong operator, a missing import) and still know what the right code is. The
tests' expected values are computed by running the right code itself (`evaluate`), never written by hand.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from warpcode.training.tasks.functions import Constant, Function, FunctionMaker, stdlib_modules
from warpcode.training.tasks.layout import Layout, Places
from warpcode.training.tasks.task import Redraw
from warpcode.training.tasks.words import Vocabulary

GITIGNORE = "__pycache__/\n.pytest_cache/\n"
MODULE_DOCS = ("{Noun} helpers.", "Functions for the {noun} records.", "The {noun} computations.",
               "Small utilities around {noun} values.", "{Noun} arithmetic.")  # fmt: skip
CONFIG_DOCS = ("Configuration of the {project} project.", "Settings the {project} modules read.",
               "Constants for {project}.", "Tunable values.")  # fmt: skip
COMMENTS = ("seconds", "per batch", "do not go below 1", "in percent", "tuned by hand", "shown to users")


@dataclass
class Module:
    name: str
    doc: str
    functions: list[Function] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    config: bool = False


@dataclass
class Check:
    """One assert of a test: the function called with `args` returns `expected`."""

    args: tuple[Any, ...]
    expected: Any

    def line(self, function: str) -> str:
        call = f"{function}({', '.join(repr(a) for a in self.args)})"
        if isinstance(self.expected, bool):
            return f"    assert {call} is {self.expected}"
        return f"    assert {call} == {self.expected!r}"


@dataclass
class Repo:
    places: Places
    modules: list[Module]  # in import order: a module imports only from those before it
    config: Module | None
    config_access: str  # "names" (from settings import MAX_X) or "module" (settings.MAX_X)
    checks: dict[str, list[Check]] = field(default_factory=dict)  # tested function -> its asserts
    missing_import: tuple[str, str] | None = None  # (module, name): the import that module lacks

    @property
    def layout(self) -> Layout:
        return self.places.layout

    def functions(self) -> list[Function]:
        return [f for m in self.modules for f in m.functions]

    def function(self, name: str) -> Function:
        return next(f for f in self.functions() if f.name == name)

    def module_of(self, name: str) -> Module:
        return next(m for m in self.modules if any(f.name == name for f in m.functions))

    def path(self, module: Module) -> str:
        return self.places.module_path(module.name, module.config)

    def dotted(self, module: Module) -> str:
        return self.places.dotted(module.name, module.config)

    def test_path(self, function: str) -> str:
        if self.layout.tests == "single":
            return f"tests/test_{self.places.project}.py"
        return f"tests/test_{self.module_of(function).name}.py"

    def constant(self, name: str) -> Constant:
        return next(c for c in self.config.constants if c.name == name)

    def names(self) -> set[str]:
        """The made-up names: project, package, folders, modules, functions, parameters, constants."""
        places = self.places
        names = {places.project} | ({places.package} if self.layout.root != "flat" else set())
        names |= {places.sub} if self.layout.root == "nested" else set()
        for module in [*self.modules, *([self.config] if self.config else [])]:
            names.add(module.name)
            names |= {c.name for c in module.constants}
            for function in module.functions:
                names |= {function.name, *function.params}
        return names

    def values(self) -> set[str]:
        """The chosen values, as written: constants, the functions' numbers and words, the tests' arguments."""
        values = (
            {str(c.value) for c in self.config.constants if not isinstance(c.value, bool)} if self.config else set()
        )
        for function in self.functions():
            values |= {v for v in function.slots.values() if v.isdigit()}
            values |= {v for v in function.bug.values() if v.isdigit()}
            if function.kind == "label":
                values.add(function.template.split('"')[1].removesuffix("-"))
            for check in self.checks.get(function.name, []):
                values |= {str(a) for a in check.args}
        return values

    # --- the right code, run ---

    def evaluate(self, function: str, args: tuple[Any, ...], buggy: bool = False) -> Any:
        """What `function(*args)` returns: the right code's answer, or (`buggy`) the answer of the code as written."""
        stdlib = sorted({m for f in self.functions() for m in f.stdlib})
        lines = [f"import {m}" for m in stdlib]
        lines += [c.line() for c in self.config.constants] if self.config else []
        lines += [f.source(lambda name: name, buggy) for f in self.functions()]
        namespace: dict[str, Any] = {}
        exec("\n".join(lines), namespace)  # code this module generated itself, nothing from outside
        return namespace[function](*args)

    # --- the text ---

    def files(self) -> dict[str, str]:
        files = {".gitignore": GITIGNORE, "README.md": self._readme(), **self.places.pytest_files()}
        files.update(dict.fromkeys(self.places.package_inits(), ""))
        if self.config:
            files[self.path(self.config)] = self._config_text()
        for module in self.modules:
            files[self.path(module)] = self.module_text(module)
        tests: dict[str, list[str]] = {}
        for module in self.modules:
            for function in module.functions:
                if function.name in self.checks:
                    tests.setdefault(self.test_path(function.name), []).append(function.name)
        for path, names in tests.items():
            files[path] = self._test_text(names)
        return files

    def module_text(self, module: Module) -> str:
        header = f'"""{module.doc}"""\n\n'
        imports = self.import_block(module)
        body = "\n\n".join(f.source(self._constant_reference) for f in module.functions)
        return header + (imports + "\n\n" if imports else "") + "\n" + body

    def import_lines(self, module: Module) -> tuple[list[str], list[str]]:
        """(standard imports, project imports) of `module`, as written: less the missing import's name."""
        missing = self.missing_import[1] if self.missing_import and self.missing_import[0] == module.name else None
        stdlib = sorted({m for f in module.functions for m in f.stdlib} - {missing})
        project: dict[str, set[str]] = {}  # import path -> names
        for function in module.functions:
            for callee in function.calls:
                project.setdefault(self._import_path(self.module_of(callee)), set()).add(callee)
        constants = {c for f in module.functions for c in f.constants}
        if constants and self.config_access == "names":
            project.setdefault(self._import_path(self.config), set()).update(constants)
        lines = [f"from {path} import {', '.join(sorted(names - {missing}))}"
                 for path, names in sorted(project.items()) if names - {missing}]  # fmt: skip
        if constants and self.config_access == "module" and missing != self.config.name:
            lines.append(self._config_module_import())
        return [f"import {m}" for m in stdlib], lines

    def import_block(self, module: Module) -> str:
        stdlib, project = self.import_lines(module)
        return "\n\n".join("\n".join(group) for group in (stdlib, project) if group)

    def _import_path(self, module: Module) -> str:
        if self.layout.imports == "relative":
            return self.places.relative(module.name, module.config)
        return self.dotted(module)

    def _config_module_import(self) -> str:
        """`import settings`, `from pkg import settings` or `from . import settings` (`from .. import` in a
        sub-package)."""
        name = self.config.name
        if self.layout.root == "flat":
            return f"import {name}"
        if self.layout.imports == "relative":
            return f"from {'..' if self.layout.root == 'nested' else '.'} import {name}"
        return f"from {self.dotted(self.config).rpartition('.')[0]} import {name}"

    def _constant_reference(self, name: str) -> str:
        return f"{self.config.name}.{name}" if self.config_access == "module" else name

    def _config_text(self) -> str:
        lines = "\n".join(c.line() for c in self.config.constants)
        return f'"""{self.config.doc}"""\n\n{lines}\n'

    def _test_text(self, names: list[str]) -> str:
        by_path: dict[str, list[str]] = {}
        for name in names:
            by_path.setdefault(self.dotted(self.module_of(name)), []).append(name)
        imports = "\n".join(f"from {path} import {', '.join(sorted(n))}" for path, n in sorted(by_path.items()))
        tests = []
        for name in names:
            lines = [check.line(name) for check in self.checks[name]]
            tests.append(f"def test_{name}():\n" + "\n".join(lines) + "\n")
        return imports + "\n\n\n" + "\n\n".join(tests)

    def _readme(self) -> str:
        return f"# {self.places.project}\n\nSmall {self.places.project} utilities. Run the tests with `pytest`.\n"


def build_repo(vocab: Vocabulary, layout: Layout, kinds: tuple[str, ...] = (), config: bool | None = None) -> Repo:
    """A repository of 2-3 modules with 2-3 functions each, holding at least one function of each of `kinds`, with
    a configuration module when `config` (None: by chance). Every function is tested (a task may drop tests)."""
    rng = vocab.rng
    places = Places(layout, vocab.noun(), vocab.noun(), vocab.noun())
    config_module = _config_module(vocab, places.project) if config or (config is None and rng.random() < 0.6) else None
    maker = FunctionMaker(vocab)
    stdlib = stdlib_modules(vocab.split)
    modules: list[Module] = []
    callees: list[Function] = []  # one-argument functions of earlier modules that return an integer
    wanted = list(kinds)
    count = rng.randint(2, 3)
    for index in range(count):
        noun = vocab.noun()
        doc = rng.choice(MODULE_DOCS).format(noun=noun, Noun=noun.capitalize())
        module = Module(noun, doc)
        last = index == count - 1
        for number in range(rng.randint(2, 3)):
            if index == 0 and number == 0:
                kind = "affine"  # a function later modules can call
            else:
                kind = _pick_kind(rng, wanted if last else [], bool(callees), config_module is not None)
            if kind in wanted:
                wanted.remove(kind)
            module.functions.append(_make(maker, kind, rng, callees, config_module, stdlib))
        for kind in wanted if last else []:  # what the module's own draws did not give yet
            module.functions.append(_make(maker, kind, rng, callees, config_module, stdlib))
        callees += [f for f in module.functions if f.kind in ("affine", "call")]
        modules.append(module)
    access = rng.choice(["names", "module"])
    repo = Repo(places, modules, config_module, access)
    for function in repo.functions():
        repo.checks[function.name] = checks_for(repo, function, vocab)
    return repo


def _pick_kind(rng: random.Random, wanted: list[str], callees: bool, config: bool) -> str:
    if wanted:
        return wanted[0]
    kinds = {"affine": 3, "pair": 2, "compare": 2, "stdlib": 2, "label": 1}
    if callees:
        kinds["call"] = 2
    if config:
        kinds["setting"] = 2
    return rng.choices(list(kinds), weights=list(kinds.values()))[0]


def _make(maker: FunctionMaker, kind: str, rng: random.Random, callees, config: Module | None, stdlib) -> Function:
    if kind == "call":
        return maker.call(rng.choice(callees))
    if kind == "setting":
        return maker.setting(rng.choice(config.constants))
    if kind == "stdlib":
        return maker.stdlib(rng.choice(stdlib))
    return getattr(maker, kind)()


def _config_module(vocab: Vocabulary, project: str) -> Module:
    rng = vocab.rng
    doc = rng.choice(CONFIG_DOCS).format(project=project)
    module = Module(vocab.config_module(), doc, config=True)
    makers = [lambda: vocab.int_value(), lambda: vocab.float_value(), lambda: vocab.word_value()]
    kinds = [0, 1, 2, rng.choice([0, 0, 1, 2])]  # an integer, a float and a word at least, then maybe a flag
    kinds += [3] if rng.random() < 0.5 else []
    rng.shuffle(kinds)
    for kind in kinds:
        value = rng.choice([True, False]) if kind == 3 else makers[kind]()
        comment = rng.choice(COMMENTS) if rng.random() < 0.3 else ""
        module.constants.append(Constant(vocab.constant_name(), value, comment))
    return module


def checks_for(repo: Repo, function: Function, vocab: Vocabulary, must_differ: bool = False) -> list[Check]:
    """One or two asserts of `function`, the expected values from the right code. `must_differ`: the first assert
    catches the function's bug (its code as written returns something else)."""
    rng = vocab.rng
    candidates = [tuple(vocab.small_int() for _ in function.params) for _ in range(40)]
    if function.kind == "compare":  # the boundary, where most of a comparison's bugs show
        candidates.insert(0, (int(function.slots["k"]),))
    if must_differ:
        differing = [a for a in candidates if repo.evaluate(function.name, a) != repo.evaluate(function.name, a, True)]
        if not differing:
            raise Redraw(f"no arguments show the bug of {function.name}")
        first = rng.choice(differing)
    else:
        first = candidates[0] if function.kind == "compare" and rng.random() < 0.5 else rng.choice(candidates[1:])
    chosen = [first]
    if rng.random() < 0.5:
        second = rng.choice([a for a in candidates if a != first])
        chosen.append(second)
    return [Check(args, repo.evaluate(function.name, args)) for args in chosen]
