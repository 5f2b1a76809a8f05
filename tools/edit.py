"""edit_file: replace a block of text, exactly when possible, else tolerant of whitespace and indentation."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from warpcode.tools import errors
from warpcode.tools.matching import LEVELS, closest_candidates, find_block, non_overlapping, reindent, strip_eol
from warpcode.tools.textcodec import display, split_lines
from warpcode.tools.workspace import Workspace

SNIPPET_CONTEXT = 3


@dataclass
class EditResult:
    path: str
    created: bool
    replacements: int
    strategy: str  # "exact", "ignoring indentation", ... or "created"
    first_line: int  # 1-based line of the first replacement in the new file
    old_text: str  # whole file before ("" when created)
    new_text: str  # whole file after

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                split_lines(self.old_text), split_lines(self.new_text), f"a/{self.path}", f"b/{self.path}"
            )
        )

    def render(self) -> str:
        if self.created:
            return f"Created {self.path}."
        how = "" if self.strategy == "exact" else f" (matched {self.strategy})"
        plural = "s" if self.replacements != 1 else ""
        lines = split_lines(self.new_text)
        begin = max(1, self.first_line - SNIPPET_CONTEXT)
        end = min(len(lines), self.first_line + SNIPPET_CONTEXT + 3)
        snippet = "\n".join(f"{n:>6}\t{display(strip_eol(lines[n - 1]))}" for n in range(begin, end + 1))
        return f"Edited {self.path}: {self.replacements} replacement{plural}{how}. Lines {begin}-{end} now:\n{snippet}"


def edit_file(ws: Workspace, path: str, old_text: str, new_text: str, replace_all: bool = False) -> EditResult:
    """Replace old_text by new_text; refused (StaleFile) when the file changed since the agent last saw it."""
    target = ws.resolve_for_write(path)
    rel = ws.rel(target)
    if old_text == "":
        return _create(ws, path, rel, new_text)
    text_file = ws.read_text(path)  # not remembered as seen: the check below compares against the last read_file
    ws.check_unchanged(path, text_file.fingerprint)
    old, new = text_file.normalize(old_text), text_file.normalize(new_text)
    if old == new:
        raise errors.InvalidArgument("old_text and new_text are identical; there is nothing to change.")
    text = text_file.text
    count = text.count(old)
    if count:
        first = text.find(old)
        if count > 1 and not replace_all:
            raise errors.AmbiguousEdit(rel, _exact_lines(text, old))
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        ws.write_text(path, updated, like=text_file)
        line = text.count("\n", 0, first) + 1
        return EditResult(rel, False, count if replace_all else 1, "exact", line, text, updated)
    lines = split_lines(text)
    needle = [strip_eol(line) for line in split_lines(old)]
    while len(needle) > 1 and not needle[-1].strip():
        needle.pop()
    for name, normalize, adapt_indent in LEVELS[1:]:
        haystack = [normalize(strip_eol(line)) for line in lines]
        hits = non_overlapping(find_block(haystack, [normalize(line) for line in needle]), len(needle))
        if not hits:
            continue
        if len(hits) > 1 and not replace_all:
            raise errors.AmbiguousEdit(rel, [hit + 1 for hit in hits])
        updated_lines = list(lines)
        for hit in reversed(hits):
            block = lines[hit : hit + len(needle)]
            replacement = _replacement(new, needle, block, adapt_indent)
            updated_lines[hit : hit + len(needle)] = [replacement] if replacement else []
        updated = "".join(updated_lines)
        ws.write_text(path, updated, like=text_file)
        return EditResult(rel, False, len(hits), name, hits[0] + 1, text, updated)
    raise errors.EditNotFound(rel, display(closest_candidates(lines, needle)))


def _replacement(new: str, needle: list[str], block: list[str], adapt_indent: bool) -> str:
    """Text replacing `block`, re-indented like the file and ending the way the block ended."""
    if new == "":
        return ""
    new_lines = new[:-1].split("\n") if new.endswith("\n") else new.split("\n")
    if adapt_indent:
        new_lines = reindent(new_lines, needle, [strip_eol(line) for line in block])
    ending = "\n" if block[-1].endswith("\n") else ""
    return "\n".join(new_lines) + ending


def _exact_lines(text: str, old: str) -> list[int]:
    found, start = [], 0
    while (index := text.find(old, start)) != -1:
        found.append(text.count("\n", 0, index) + 1)
        start = index + max(len(old), 1)
    return found


def _create(ws: Workspace, path: str, rel: str, new_text: str) -> EditResult:
    target = ws.resolve_for_write(path)
    if target.exists():
        existing = ws.read_text(path)
        ws.check_unchanged(path, existing.fingerprint)
        if existing.text:
            raise errors.FileExists(
                rel, "old_text is empty, which only creates a file. Give the text to replace, or use write_file."
            )
        ws.write_text(path, existing.normalize(new_text), like=existing)
        return EditResult(rel, False, 1, "exact", 1, "", existing.normalize(new_text))
    ws.write_text(path, new_text)
    return EditResult(rel, True, 1, "created", 1, "", new_text)
