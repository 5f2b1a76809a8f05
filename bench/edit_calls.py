"""edit_file calls written the way models write them, derived from real one-hunk commits, and their grading.

A real edit is a parent file, its child, and the block of lines that changed (with enough context to be
unique). From it come calls whose right answer is known: the exact block, and the block with the mistakes
models make (indentation shifted either way, tabs written as spaces, a trailing blank line, trailing
whitespace dropped, one line quoted without its indentation). For each call the only right result is the
child file; a tolerant call may also be refused (the text was ambiguous), never applied elsewhere or wrongly.
Shared by tests/tools/test_edit_corpus.py (a compact sample) and bench/edit_corpus.py (the full run).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from warpcode.tools import Workspace, edit_file
from warpcode.tools.errors import ToolError

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "edit_corpus"  # in a checkout
MAX_CONTEXT = 6  # context lines added around a change until the block is unique in the parent
MAX_BLOCK_LINES = 40
_INDENT = re.compile(r"[ \t]*")
_CANDIDATE_LINE = re.compile(r"^ *\d+\t", re.MULTILINE)


@dataclass
class RealEdit:
    repo: str
    commit: str
    path: str
    parent: str  # whole file, LF or CRLF as stored in git
    child: str

    def as_json(self) -> dict[str, str]:
        return {"repo": self.repo, "commit": self.commit, "path": self.path, "parent": self.parent, "child": self.child}


@dataclass
class Call:
    variant: str
    old_text: str
    new_text: str


def load_sample() -> list[RealEdit]:
    with open(FIXTURES / "edits.jsonl", encoding="utf-8") as stream:
        records = [json.loads(line) for line in stream if line.strip()]
    fields = ("repo", "commit", "path", "parent", "child")
    return [RealEdit(**{key: record[key] for key in fields}) for record in records]


def changed_block(parent: str, child: str) -> tuple[list[str], list[str]] | None:
    """(old lines, new lines) of the one changed region plus context making the old block unique, LF-only.
    None when the change cannot be described as a unique block (a pure insertion at an ambiguous spot)."""
    a, b = _lf(parent).split("\n"), _lf(child).split("\n")
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    for context in range(1, MAX_CONTEXT + 1):
        begin, after = max(0, head - context), min(context, tail)
        old_end, new_end = len(a) - tail + after, len(b) - tail + after
        old, new = a[begin:old_end], b[begin:new_end]
        if len(old) > MAX_BLOCK_LINES or len(new) > MAX_BLOCK_LINES:
            return None
        text = "\n".join(old)
        if any(line.strip() for line in old) and _lf(parent).count(text) == 1:
            return old, new
    return None


def calls_for(edit: RealEdit) -> list[Call]:
    """The exact call and every model-style variant that differs from it."""
    block = changed_block(edit.parent, edit.child)
    if block is None:
        return []
    old, new = block
    calls = [Call("exact", "\n".join(old), "\n".join(new))]
    if edit.parent.endswith("\n") != edit.child.endswith("\n") or _changes_whitespace(old, new):
        return calls  # a variant tolerant of whitespace cannot carry a whitespace change: its answer is a guess

    def add(name: str, old_lines: list[str] | None, new_lines: list[str] | None) -> None:
        if old_lines is None or new_lines is None:
            return
        call = Call(name, "\n".join(old_lines), "\n".join(new_lines))
        if call.old_text != calls[0].old_text and call.old_text.strip() and call.old_text != call.new_text:
            calls.append(call)

    dedented = _dedent(old, new)
    add("less indentation", *(dedented or (None, None)))
    unit = "\t" if any(_indent(line).startswith("\t") for line in old) else "    "
    add("more indentation", [_prefix(unit, line) for line in old], [_prefix(unit, line) for line in new])
    if any("\t" in _indent(line) for line in old):
        add("tabs as spaces", [_tabs_as_spaces(line) for line in old], [_tabs_as_spaces(line) for line in new])
    add("trailing blank line", _blank_after(old), _blank_after(new))
    if dedented:
        add("less indentation, trailing blank line", _blank_after(dedented[0]), _blank_after(dedented[1]))
    more_old, more_new = [_prefix(unit, line) for line in old], [_prefix(unit, line) for line in new]
    add("more indentation, trailing blank line", _blank_after(more_old), _blank_after(more_new))
    if any(line != line.rstrip() for line in old) and not any(line != line.rstrip() for line in _changed(old, new)):
        add("trailing whitespace dropped", [line.rstrip() for line in old], [line.rstrip() for line in new])
    one_line = _one_line_change(edit)
    if one_line:
        old_line, new_lines = one_line
        depth = _indent(old_line)
        if depth and all(line.startswith(depth) or not line.strip() for line in new_lines):
            add("one line without indentation", [old_line[len(depth) :]], [line[len(depth) :] for line in new_lines])
        add("one line, more indentation", [_prefix(unit, old_line)], [_prefix(unit, line) for line in new_lines])
        if depth.startswith(unit) and all(line.startswith(unit) or not line.strip() for line in new_lines):
            add("one line, one level less", [old_line[len(unit) :]], [line[len(unit) :] for line in new_lines])
    return calls


@dataclass
class Outcome:
    call: Call
    kind: str  # "right", "wrong text", "wrong place", "refused", "refused without candidates", "crash"
    detail: str = ""


def run_call(edit: RealEdit, call: Call, scratch: Path) -> Outcome:
    """Apply `call` to a fresh copy of the parent file and grade the result against the child."""
    name = Path(edit.path).name
    target = scratch / name
    target.write_bytes(edit.parent.encode("utf-8", "surrogateescape"))
    try:
        edit_file(Workspace(scratch, state_dir=scratch.parent / "state"), name, call.old_text, call.new_text)
    except ToolError as error:
        message = str(error)
        if target.read_bytes() != edit.parent.encode("utf-8", "surrogateescape"):
            return Outcome(call, "crash", "refused but the file changed")
        has_candidates = bool(_CANDIDATE_LINE.search(message)) or "lines " in message
        return Outcome(call, "refused" if has_candidates else "refused without candidates", message)
    except Exception as error:  # any other exception is what the corpus is looking for
        return Outcome(call, "crash", repr(error))
    result = target.read_bytes().decode("utf-8", "surrogateescape")
    if result == edit.child:
        return Outcome(call, "right")
    return Outcome(call, _wrong_kind(edit.parent, edit.child, result), _first_difference(edit.child, result))


def grade(edits: list[RealEdit]) -> Iterator[tuple[RealEdit, Outcome]]:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "ws"
        scratch.mkdir()
        for edit in edits:
            for call in calls_for(edit):
                yield edit, run_call(edit, call, scratch)


def _wrong_kind(parent: str, child: str, result: str) -> str:
    """'wrong text' when the result changed the lines the commit changed, 'wrong place' when it changed others."""
    expected = _changed_span(parent, child)
    actual = _changed_span(parent, result)
    overlap = actual[0] <= expected[1] and expected[0] <= actual[1]
    return "wrong text" if overlap else "wrong place"


def _changed_span(before: str, after: str) -> tuple[int, int]:
    a, b = before.split("\n"), after.split("\n")
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, max(head, len(a) - tail)


def _first_difference(want: str, got: str) -> str:
    a, b = want.split("\n"), got.split("\n")
    for number, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            return f"line {number}: want {x!r} got {y!r}"
    return f"line counts differ: want {len(a)} got {len(b)}"


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _indent(line: str) -> str:
    match = _INDENT.match(line)
    return match.group(0) if match else ""


def _prefix(unit: str, line: str) -> str:
    return unit + line if line.strip() else line


def _blank_after(lines: list[str]) -> list[str]:
    """The block followed by one blank line, as in old_text "...last line\\n\\n"."""
    return [*lines, "", ""] if lines[-1] else [*lines, ""]


def _tabs_as_spaces(line: str) -> str:
    depth = _indent(line)
    return depth.replace("\t", "    ") + line[len(depth) :]


def _dedent(old: list[str], new: list[str]) -> tuple[list[str], list[str]] | None:
    """Both blocks with the indentation common to every non-blank line of old_text removed."""
    depths = [_indent(line) for line in old if line.strip()]
    common = depths[0] if depths else ""
    for depth in depths[1:]:
        while not depth.startswith(common):
            common = common[:-1]
    if not common or not all(line.startswith(common) or not line.strip() for line in new):
        return None
    return [line[len(common) :] for line in old], [line[len(common) :] for line in new]


def _changes_whitespace(old: list[str], new: list[str]) -> bool:
    """Only whitespace changed, or a changed line is whitespace alone, re-indented, or indented with the other
    character (a tab where the block indents with spaces): what a whitespace mistake in the variant hides."""

    def words(lines: list[str]) -> list[str]:
        return [" ".join(line.split()) for line in lines if line.strip()]

    old_chars = {line[0] for line in old if line.strip() and line[0] in " \t"}
    old_bodies = {line.strip() for line in old}
    for line in _changed(old, new):
        if (line and not line.strip()) or (line[:1] in (" ", "\t") and line[0] not in old_chars):
            return True
        if line.strip() in old_bodies:  # a line kept but re-indented
            return True
    return words(old) == words(new)


def _changed(old: list[str], new: list[str]) -> list[str]:
    kept = set(old)
    return [line for line in new if line not in kept]


def _one_line_change(edit: RealEdit) -> tuple[str, list[str]] | None:
    """(the one old line, its new lines) when the commit replaced exactly one line whose text is unique."""
    a, b = _lf(edit.parent).split("\n"), _lf(edit.child).split("\n")
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    old = a[head : len(a) - tail]
    if len(old) != 1 or not old[0].strip() or [line.strip() for line in a].count(old[0].strip()) != 1:
        return None
    return old[0], b[head : len(b) - tail]
