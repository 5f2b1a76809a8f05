"""Family 3: fix a NameError by adding the missing import.

A module uses a name it never imports: a standard module (`math.floor(...)` without `import math`), a function of
another module, a configuration constant, or the configuration module itself. The tests that call the function
fail with `NameError: name '...' is not defined`. Done when the tests pass and only that module changed. The oracle
runs the tests, finds where the name is defined when it is the project's own, reads the module, adds the import
and runs the tests again.
"""

from __future__ import annotations

from warpcode.training.tasks.layout import Layout
from warpcode.training.tasks.repo import build_repo
from warpcode.training.tasks.task import PYTEST, Look, Plan, line_edit
from warpcode.training.tasks.words import Vocabulary

# what is missing -> the kind of function that uses it
VARIANTS = {"stdlib": "stdlib", "function": "call", "constant": "setting", "config_module": "setting"}
INSTRUCTIONS = (
    "The tests fail with NameError: name '{name}' is not defined. Fix it.",
    "Calling {function} raises a NameError. Add the missing import.",
    "Fix the NameError in {path}.",
    "{path} uses {name} without importing it; please fix that.",
    "There's a NameError when running the tests. Please fix it.",
    "Something is not imported in {path}: {function} crashes with a NameError. Fix it.",
    "test_{function} fails with a NameError about {name}. Add whatever import is missing.",
    "fix the missing import",
)
ANSWERS = (
    "Added the missing import to {path}: `{line}`. The tests pass now.",
    "{path} used `{name}` without importing it; I added `{line}` and the tests pass.",
    "Fixed the NameError: {path} now has `{line}`, and all tests pass.",
)


def build(vocab: Vocabulary, layout: Layout) -> dict:
    rng = vocab.rng
    variant = rng.choice(list(VARIANTS))
    kind = VARIANTS[variant]
    repo = build_repo(vocab, layout, kinds=(kind,), config=kind == "setting" or None)
    if kind == "setting":
        repo.config_access = "module" if variant == "config_module" else "names"
    function = rng.choice([f for f in repo.functions() if f.kind == kind])
    name = {"stdlib": function.stdlib, "function": function.calls, "constant": function.constants,
            "config_module": (repo.config.name if repo.config else "",)}[variant][0]  # fmt: skip
    module = repo.module_of(function.name)
    path = repo.path(module)
    right = repo.module_text(module)
    repo.missing_import = (module.name, name)
    files = repo.files()
    edit = line_edit(path, files[path], right)
    line = next(line for line in edit.new.split("\n") if name in line and "import" in line)
    looks = [Look("run_tests")]
    if variant == "function":
        looks.append(Look("search", {"pattern": rf"def {name}\("}))
    elif variant == "constant":
        looks.append(Look("search", {"pattern": rf"^{name} ="}))
    elif variant == "config_module":
        looks.append(Look("list_files", {"pattern": f"**/{name}.py"}))
    looks.append(Look("read_file", {"path": path}))
    names = {"name": name, "function": function.name, "path": path}
    return {
        "repo": repo,
        "files": files,
        "instruction": rng.choice(INSTRUCTIONS).format(**names),
        "test_command": PYTEST,
        "expected_files": (path,),
        "plan": Plan(looks, [edit], rng.choice(ANSWERS).format(**names, line=line)),
    }
