"""The fine-tuning tasks: four families of small, checkable coding jobs on made-up repositories.

1. rename: rename a function, its definition and every call site (rename.py);
2. failing_test: make a failing test pass, the bug a wrong constant or operator (failing_test.py);
3. missing_import: fix a NameError by adding the missing import (missing_import.py);
4. config_value: set a named configuration constant to a given value (config_value.py).

`make_task(family, split, seed)` builds one task, the same for the same arguments. A task holds the repository's
files, the instruction, the test command that passes exactly when the job is done, the files a solution changes,
and the plan the oracle follows. Training and held-out tasks draw their names, values and file layouts from
disjoint pools (words.py, layout.py): a held-out task shares none of them with any training task.
"""

from __future__ import annotations

import random

from warpcode.training.tasks import config_value, failing_test, missing_import, rename
from warpcode.training.tasks.layout import layouts
from warpcode.training.tasks.task import Edit, Look, Plan, Redraw, Task
from warpcode.training.tasks.words import SPLITS, Vocabulary

FAMILIES = {
    "rename": rename.build,
    "failing_test": failing_test.build,
    "missing_import": missing_import.build,
    "config_value": config_value.build,
}
ATTEMPTS = 20  # a draw that cannot make its task (no fresh name left, no test left) is drawn again

__all__ = ["FAMILIES", "SPLITS", "Edit", "Look", "Plan", "Redraw", "Task", "family_of", "make_task"]


def family_of(seed: int) -> str:
    """The family of the task numbered `seed` in a set: the families take turns, so any run of seeds is balanced."""
    return list(FAMILIES)[seed % len(FAMILIES)]


def make_task(family: str, split: str, seed: int) -> Task:
    if family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}: use one of {', '.join(FAMILIES)}")
    rng = random.Random(f"{family}:{split}:{seed}")
    for _ in range(ATTEMPTS):
        vocab = Vocabulary(split, rng)
        layout = rng.choice(layouts(split))
        try:
            made = FAMILIES[family](vocab, layout)
        except Redraw:
            continue
        repo = made.pop("repo")
        names, values = repo.names() | made.pop("names", set()), repo.values() | made.pop("values", set())
        return Task(family, split, seed, layout.signature, **made, names=frozenset(names), values=frozenset(values))
    raise RuntimeError(f"could not make a {family} task for seed {seed} in {ATTEMPTS} draws")
