"""Family 1: rename a function: its definition and every use in the repository (the calls and imports of other
modules, the tests).

Done when no Python file names the old function any more, the new one is defined, and the tests pass; the files
changed are exactly those that named it. The oracle finds them with one search and replaces the name in each.
"""

from __future__ import annotations

import re

from warpcode.training.tasks.layout import Layout
from warpcode.training.tasks.repo import build_repo
from warpcode.training.tasks.task import PYTEST, Edit, Look, Plan, python_check
from warpcode.training.tasks.words import Vocabulary

INSTRUCTIONS = (
    "Rename the function `{old}` to `{new}`, including every call site.",
    "Please rename {old} to {new} throughout the repository.",
    "`{old}` is a poor name. Call it `{new}` instead, everywhere it is used.",
    "Rename {old}() to {new}() and update all callers and tests.",
    "Change the name of the function {old} to {new}, in its definition and in all of its uses.",
    "Could you rename `{old}` to `{new}`? Keep the tests passing.",
    "Refactor: {old} should be named {new}. Update the definition and every reference.",
    "Rename the function {old}, defined in {path}, to {new}; fix every place that uses it.",
    "rename {old} -> {new} everywhere",
)
ANSWERS = (
    "Renamed `{old}` to `{new}` in {count}: {paths}. The tests pass.",
    "`{old}` is now `{new}`: I changed its definition and every use ({paths}), and the tests pass.",
    "Done. The function is called `{new}` now, in {paths}; all tests pass.",
)


def build(vocab: Vocabulary, layout: Layout) -> dict:
    rng = vocab.rng
    repo = build_repo(vocab, layout, kinds=("call",))
    called = sorted({callee for f in repo.functions() for callee in f.calls})
    old = rng.choice(called) if rng.random() < 0.8 else rng.choice(repo.functions()).name
    new = vocab.function_name()
    files = repo.files()
    uses = re.compile(rf"\b{old}\b")
    paths = sorted(path for path, text in files.items() if path.endswith(".py") and uses.search(text))
    search = {"pattern": rf"\b{old}\b", **({"glob": "*.py"} if rng.random() < 0.3 else {})}
    count = f"{len(paths)} file{'s' if len(paths) > 1 else ''}"
    check = (
        'import pathlib, re, sys; text = "".join(p.read_text() for p in pathlib.Path(".").rglob("*.py")); '
        f'sys.exit("{old} is still used" if re.search(r"\\b{old}\\b", text) else '
        f'None if re.search(r"def {new}\\(", text) else "{new} is not defined")'
    )
    return {
        "repo": repo,
        "names": {new},
        "files": files,
        "instruction": rng.choice(INSTRUCTIONS).format(old=old, new=new, path=repo.path(repo.module_of(old))),
        "test_command": f"{PYTEST} && {python_check(check)}",
        "expected_files": tuple(paths),
        "plan": Plan(
            [Look("search", search)],
            [Edit(path, old, new, replace_all=True) for path in paths],
            rng.choice(ANSWERS).format(old=old, new=new, count=count, paths=", ".join(paths)),
        ),
    }
