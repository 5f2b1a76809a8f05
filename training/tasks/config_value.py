"""Family 4: set a named configuration constant to a given value.

Done when importing the configuration module gives the constant the new value, the tests still pass, and only the
configuration module changed. (The functions that read the constant are left untested, so that the tests hold
whatever value it has.) The oracle searches for the name, reads the configuration module and edits its line.
"""

from __future__ import annotations

from warpcode.training.tasks.layout import Layout
from warpcode.training.tasks.repo import build_repo
from warpcode.training.tasks.task import PYTEST, Look, Plan, Redraw, line_edit, python_check
from warpcode.training.tasks.words import Vocabulary

INSTRUCTIONS = (
    "Set {name} to {value}.",
    "Change the {name} setting to {value}.",
    "Please update {name} in the configuration so that it is {value}.",
    "We need {name} = {value}. Update the config.",
    "Set the configuration constant {name} to {value} (it lives in {path}).",
    "Make {name} equal to {value}.",
    "{name} should be {value} from now on.",
    "In {path}, change {name} to {value}.",
)
ANSWERS = (
    "Set {name} to {value} in {path}. The tests still pass.",
    "{name} is now {value} ({path}); all tests pass.",
    "Changed {name} from {old} to {value} in {path}, and the tests pass.",
)


def build(vocab: Vocabulary, layout: Layout) -> dict:
    rng = vocab.rng
    repo = build_repo(vocab, layout, config=True)
    constant = rng.choice([c for c in repo.config.constants if not isinstance(c.value, bool)])
    if isinstance(constant.value, str):
        value = vocab.word_value(exclude=[constant.value])
    elif isinstance(constant.value, float):
        value = vocab.float_value(exclude=[constant.value])
    else:
        value = vocab.int_value(exclude=[constant.value])
    for function in repo.functions():
        if constant.name in function.constants:
            del repo.checks[function.name]
    if not repo.checks:
        raise Redraw("no test left to run")
    files = repo.files()
    path = repo.path(repo.config)
    edit = line_edit(path, files[path], files[path].replace(constant.line(), constant.line(value)))
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    names = {"name": constant.name, "value": shown, "path": path, "old": constant.line().split(" = ")[1].split()[0]}
    pattern = rng.choice([constant.name, rf"\b{constant.name}\b", rf"^{constant.name} ="])
    check = (
        f'import sys; sys.path.insert(0, "{layout.import_root}"); import {repo.dotted(repo.config)} as config; '
        f'sys.exit(None if config.{constant.name} == {shown} else "{constant.name} is " + repr(config.{constant.name}))'
    )
    return {
        "repo": repo,
        "values": {str(value)},
        "files": files,
        "instruction": rng.choice(INSTRUCTIONS).format(**names),
        "test_command": f"{PYTEST} && {python_check(check)}",
        "expected_files": (path,),
        "plan": Plan(
            [Look("search", {"pattern": pattern}), Look("read_file", {"path": path})],
            [edit],
            rng.choice(ANSWERS).format(**names),
        ),
    }
