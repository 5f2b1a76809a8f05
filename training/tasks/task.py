"""One task: a made-up repository, one instruction, the command that tells whether it was done, and the plan an
oracle follows to do it with the agent's tools.

The plan says what to look at (searches, reads, a first test run) and which edits solve the task; the oracle
(training/oracle.py) turns it into tool calls, choosing how (edit_file or apply_patch, one call per turn or
several) and checking that every edit's old text was shown to it by a tool first.
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass, field
from typing import Any

# The repositories' tests need no pytest plugin; the machine's plugins would only slow every run down (a second
# each with hypothesis, anyio and pytest-asyncio installed) and could print warnings into the results.
PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python3 -m pytest -q -p no:cacheprovider"


class Redraw(Exception):
    """This draw of a task cannot be made (no arguments show its bug, no test is left): draw it again."""


@dataclass
class Edit:
    path: str
    old: str
    new: str
    replace_all: bool = False

    def apply(self, text: str) -> str:
        if self.replace_all:
            return text.replace(self.old, self.new)
        if text.count(self.old) != 1:
            raise ValueError(f"the old text of an edit of {self.path} is not in it exactly once")
        return text.replace(self.old, self.new)


@dataclass
class Look:
    """One tool call that looks before editing: `tool` with `arguments`. `tool` "read_found" reads every file the
    last search listed (the oracle takes the paths from the search's real output)."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Plan:
    looks: list[Look]
    edits: list[Edit]
    answer: str  # the final message


@dataclass
class Task:
    family: str
    split: str
    seed: int
    layout: str  # the layout's signature
    files: dict[str, str]  # the repository: path -> text
    instruction: str
    test_command: str  # exits 0 exactly when the task is done (/bin/sh -c, in the repository's root)
    expected_files: tuple[str, ...]  # the files a solution changes, no more, no fewer
    plan: Plan
    names: frozenset[str]  # the made-up names it uses (functions, parameters, modules, constants)
    values: frozenset[str]  # the values it chose (constants, arguments), as written

    def solved_files(self) -> dict[str, str]:
        """The repository as the plan's edits leave it."""
        files = dict(self.files)
        for edit in self.plan.edits:
            files[edit.path] = edit.apply(files[edit.path])
        return files


def line_edit(path: str, before: str, after: str) -> Edit:
    """The edit_file edit that turns `before` into `after` when they differ in one run of lines: the changed lines,
    widened by neighbours until the old text holds a non-blank line and occurs once in `before`."""
    old_lines, new_lines = before.split("\n"), after.split("\n")
    changes = [op for op in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes()
               if op[0] != "equal"]  # fmt: skip
    if len(changes) != 1:
        raise ValueError(f"{path}: expected one changed run of lines, got {len(changes)}")
    _, i1, i2, j1, j2 = changes[0]
    head = tail = 0
    while True:
        old = "\n".join(old_lines[i1 - head : i2 + tail])
        if old.strip() and before.count(old) == 1:
            return Edit(path, old, "\n".join(new_lines[j1 - head : j2 + tail]))
        if i1 - head > 0 and (head <= tail or i2 + tail >= len(old_lines)):
            head += 1
        elif i2 + tail < len(old_lines):
            tail += 1
        else:
            raise ValueError(f"{path}: no unique old text around the change")


def python_check(code: str) -> str:
    """A shell word running `code` with python3 (the code may hold no single quote)."""
    if "'" in code:
        raise ValueError("a check's code is quoted in single quotes and may not hold one")
    return f"python3 -c {shlex.quote(code)}"
