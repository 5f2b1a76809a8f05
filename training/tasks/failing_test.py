"""Family 2: make a failing test pass; the bug is a wrong constant or operator in the function under test.

The function's docstring still says what it should compute, and the test's assert shows the value it should give,
so reading finds the fix. Done when the tests pass and only the function's module changed. The oracle runs the
tests, finds and reads the function, fixes the one line and runs the tests again.
"""

from __future__ import annotations

from warpcode.training.tasks.functions import BREAKABLE, break_function
from warpcode.training.tasks.layout import Layout
from warpcode.training.tasks.repo import build_repo, checks_for
from warpcode.training.tasks.task import PYTEST, Look, Plan, line_edit
from warpcode.training.tasks.words import Vocabulary

INSTRUCTIONS = (
    "The test {test_id} fails. Find the bug and fix it.",
    "`{test}` in {test_path} is failing; please fix the code, not the test.",
    "Running the tests shows a failure in {test}. Fix the function it tests.",
    "Some tests fail. Make them pass by fixing the bug in the code.",
    "{function} returns the wrong value and {test} fails. Fix {function}.",
    "Fix the failing test.",
    "pytest reports a failure in {test_path}. Please fix the underlying bug.",
    "There is a bug in {path}: {test} fails. Fix it.",
    "make the tests pass again",
)
ANSWERS = (
    "Fixed `{function}` in {path}: it used `{wrong}` where its docstring asks for `{right}`. The tests pass now.",
    "The bug was in `{function}` ({path}): `{wrong}` instead of `{right}`. I corrected it and all tests pass.",
    "Corrected `{function}` in {path} (`{wrong}` -> `{right}`); {test} and the rest of the tests pass.",
)


def build(vocab: Vocabulary, layout: Layout) -> dict:
    rng = vocab.rng
    repo = build_repo(vocab, layout, kinds=(rng.choice(BREAKABLE),))
    target = rng.choice([f for f in repo.functions() if f.kind in BREAKABLE])
    break_function(target, vocab)
    repo.checks[target.name] = checks_for(repo, target, vocab, must_differ=True)
    module = repo.module_of(target.name)
    path, test_path = repo.path(module), repo.test_path(target.name)
    files = repo.files()
    bug, target.bug = target.bug, {}
    right = repo.module_text(module)
    target.bug = bug
    slot = next(iter(bug))
    names = {"function": target.name, "path": path, "test": f"test_{target.name}", "test_path": test_path,
             "test_id": f"{test_path}::test_{target.name}"}  # fmt: skip
    first_run = {"paths": [test_path]} if rng.random() < 0.3 else {}
    if path in (instruction := rng.choice(INSTRUCTIONS).format(**names)) and rng.random() < 0.7:
        looks = [Look("run_tests", first_run), Look("read_file", {"path": path})]
    else:
        looks = [Look("run_tests", first_run), Look("search", {"pattern": rf"def {target.name}\("}), Look("read_found")]
    answer = rng.choice(ANSWERS).format(**names, wrong=bug[slot], right=target.slots[slot])
    return {
        "repo": repo,
        "files": files,
        "instruction": instruction,
        "test_command": PYTEST,
        "expected_files": (path,),
        "plan": Plan(looks, [line_edit(path, files[path], right)], answer),
    }
