"""The fine-tuning tasks: held-out tasks share no name, value or layout with training ones; a task is the same for the
same seed; the checker passes the plan's solution and catches wrong ones (a partial rename, a fix in the wrong
file, a wrong value), running each task's real test command on a real copy of its repository."""

from __future__ import annotations

import builtins
import keyword
import random
import sys
from pathlib import Path

import pytest

from warpcode.training.tasks import FAMILIES, SPLITS, Task, make_task
from warpcode.training.tasks.check import changed_files, check, run_test_command, write_repo
from warpcode.training.tasks.functions import stdlib_modules
from warpcode.training.tasks.layout import LAYOUTS, layouts
from warpcode.training.tasks.words import CONFIG_MODULES, NOUNS, QUALIFIERS, VALUE_WORDS, VERBS, made_up_word, pool

SEEDS = range(40)


def test_every_word_layout_and_standard_module_belongs_to_one_split():
    for words in (VERBS, NOUNS, QUALIFIERS, CONFIG_MODULES, VALUE_WORDS):
        train, heldout = set(pool(words, "train")), set(pool(words, "heldout"))
        assert train and heldout and not train & heldout
        assert train | heldout == set(words.split())
    assert not set(layouts("train")) & set(layouts("heldout"))
    assert set(layouts("train")) | set(layouts("heldout")) == set(LAYOUTS)
    assert stdlib_modules("train") and stdlib_modules("heldout")
    assert not set(stdlib_modules("train")) & set(stdlib_modules("heldout"))


def test_module_and_parameter_names_shadow_nothing_python_has():
    """Nouns name modules, packages and parameters, configuration words name modules: none may be a keyword, a
    builtin or a standard module (a flat repository's `queue.py` would hide the real one from pytest itself)."""
    taken = set(keyword.kwlist) | set(dir(builtins)) | set(sys.stdlib_module_names)
    for word in NOUNS.split() + CONFIG_MODULES.split():
        assert word.isidentifier() and word not in taken, word


def test_heldout_tasks_use_no_name_value_or_layout_of_training_tasks():
    train = [make_task(family, "train", seed) for family in FAMILIES for seed in SEEDS]
    heldout = [make_task(family, "heldout", seed) for family in FAMILIES for seed in SEEDS]

    def union(tasks: list[Task], field: str) -> set[str]:
        return {item for task in tasks for item in getattr(task, field)}

    assert not union(train, "names") & union(heldout, "names")
    assert not union(train, "values") & union(heldout, "values")
    assert not {t.layout for t in train} & {t.layout for t in heldout}
    for task in heldout:  # and the names and values are really in the repository the model sees
        text = "\n".join([*task.files, *task.files.values(), task.instruction])
        assert all(name in text for name in task.names) and all(value in text for value in task.values)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_task_is_the_same_for_the_same_seed_and_differs_between_seeds(family):
    first, again, other = make_task(family, "train", 7), make_task(family, "train", 7), make_task(family, "train", 8)
    assert first == again
    assert first.files != other.files and first.instruction != other.instruction


def test_tasks_vary_in_layout_and_instruction():
    for family in FAMILIES:
        tasks = [make_task(family, "train", seed) for seed in SEEDS]
        assert len({t.layout for t in tasks}) >= 10
        assert len({t.instruction.split(" ")[0] for t in tasks}) >= 4  # several phrasings


def solved_and_wrong(task: Task) -> list[tuple[str, dict[str, str]]]:
    """Wrong solutions of `task`, each (what it does wrong, the repository it leaves)."""
    solved = task.solved_files()
    wrong: list[tuple[str, dict[str, str]]] = [("nothing done", dict(task.files))]
    first = task.plan.edits[0]
    if task.family == "rename":
        wrong.append(("only the definition renamed", {**task.files, first.path: first.apply(task.files[first.path])}))
    elif task.family == "config_value":
        edit = task.plan.edits[0]
        value = edit.new.split(" = ")[1].split()[0]
        other = value[:-1] + 'x"' if value.endswith('"') else value + "1"
        wrong.append(("another value", {**task.files, edit.path: solved[edit.path].replace(value, other, 1)}))
    elif task.family == "failing_test":  # the tests weakened until they pass, the code left as it is
        weakened = {
            path: "\n".join(line.split(" == ")[0] + " is not None" if " == " in line else line
                            for line in text.split("\n"))
            for path, text in task.files.items()
            if path.startswith("tests/test_")
        }  # fmt: skip
        wrong.append(("the tests changed, not the code", {**task.files, **weakened}))
    elif task.family == "missing_import":
        name = next(line for line in first.new.split("\n") if "import" in line and line not in first.old)
        wrong.append(("the import added to a test file", {**task.files, "tests/conftest.py": name + "\n"}))
    extra = {**solved, "README.md": solved["README.md"] + "\nRenamed things.\n"}
    wrong.append(("solved, and an unrelated file changed", extra))
    return wrong


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("family", FAMILIES)
def test_the_checker_passes_the_plan_and_catches_wrong_solutions(family, split, tmp_path: Path):
    task = make_task(family, split, 3)
    right = tmp_path / "right"
    write_repo(task.files, right)
    assert not run_test_command(task, right).ok  # the job's tests fail until the task is done
    write_repo(task.solved_files(), right)
    assert changed_files(task.files, right) == sorted(task.expected_files)
    verdict = check(task, right)
    assert verdict.ok, verdict.reason
    for number, (what, files) in enumerate(solved_and_wrong(task)):
        root = tmp_path / f"wrong-{number}"
        write_repo(files, root)
        assert not check(task, root).ok, f"{what} passed the checker"


def test_training_tasks_make_up_some_name_words_and_held_out_tasks_never_do():
    """Made-up words teach copying names read in the repository instead of recalling the training words."""
    listed = set(" ".join((VERBS, NOUNS, QUALIFIERS, CONFIG_MODULES, VALUE_WORDS)).split())

    def words(split: str) -> set[str]:
        tasks = [make_task(family, split, seed) for family in FAMILIES for seed in SEEDS]
        return {part for task in tasks for name in task.names for part in name.lower().split("_")}

    made_up = words("train") - listed
    assert len(made_up) > 50 and all(word.isidentifier() and word.isalpha() for word in made_up)
    assert not made_up & (set(keyword.kwlist) | set(dir(builtins)) | set(sys.stdlib_module_names))
    assert words("heldout") <= listed
    rng = random.Random(0)
    assert len({made_up_word(rng) for _ in range(1000)}) > 900  # plenty of them
