"""edit_file: replace a block of text, exactly when possible, else tolerant of whitespace and indentation."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from warpcode.tools import errors
from warpcode.tools.indentation import adapt
from warpcode.tools.matching import LEVELS, closest_candidates, find_block, non_overlapping, strip_eol
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
    exact = _exact_hits(text, old)
    if len(exact) > 1 and not replace_all:
        raise errors.AmbiguousEdit(rel, [_line_of(text, hit) for hit in exact])
    whole_line_edit = "\n" in new.rstrip("\n") or not new.strip()  # several lines, or the line deleted
    if exact and not (whole_line_edit and len(exact) == 1 and _written_without_indentation(text, old, exact[0])):
        if len(exact) == 1 and not _whole_lines(text, old, exact[0]):
            _refuse_if_elsewhere(rel, text, old, exact[0])
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        ws.write_text(path, updated, like=text_file)
        first_line = _line_of(text, exact[0])
        return EditResult(rel, False, len(exact) if replace_all else 1, "exact", first_line, text, updated)
    lines = split_lines(text)
    new_lines = _lines_of(new)
    if new.endswith("\n") and not old.endswith("\n"):
        new_lines.append("")  # new_text ends a line that old_text left open: it adds a line break, as exactly
    needle, new_lines = _without_shared_blank_lines(_lines_of(old), new_lines)
    if not any(line.strip() for line in needle):
        raise errors.EditNotFound(rel, "")
    match = _tolerant_match(lines, needle)
    if match:
        name, hits = match
        if len(hits) > 1 and not replace_all:
            raise errors.AmbiguousEdit(rel, [hit + 1 for hit in hits])
        updated_lines = list(lines)
        for hit in reversed(hits):
            block = lines[hit : hit + len(needle)]
            updated_lines[hit : hit + len(needle)] = _replacement(new_lines, needle, block)
        updated = "".join(updated_lines)
        if updated == text:
            raise errors.InvalidArgument(
                f"old_text matched {name}, and new_text differs from it only there, so the edit changes nothing. "
                "To change whitespace, copy old_text exactly from the file (read_file)."
            )
        ws.write_text(path, updated, like=text_file)
        return EditResult(rel, False, len(hits), name, hits[0] + 1, text, updated)
    raise errors.EditNotFound(rel, display(closest_candidates(lines, needle)))


def _exact_hits(text: str, old: str) -> list[int]:
    """Offsets of old in text, not overlapping (as str.count and str.replace see them)."""
    found, start = [], 0
    while (index := text.find(old, start)) != -1:
        found.append(index)
        start = index + len(old)
    return found


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _written_without_indentation(text: str, old: str, offset: int) -> bool:
    """One line of old_text found after the indentation of a line and up to its end: the model wrote the line
    with less indentation. When new_text has several lines, or none, it matches that whole line (below): every
    line gets the indentation back, not only the first one as a substring replacement would, and a deleted
    line leaves no indentation behind."""
    if "\n" in old.rstrip("\n"):
        return False
    line_start = text.rfind("\n", 0, offset) + 1
    end = offset + len(old.rstrip("\n"))
    at_line_end = end == len(text) or text[end] == "\n"
    return line_start < offset and not text[line_start:offset].strip(" \t") and at_line_end


def _whole_lines(text: str, old: str, offset: int) -> bool:
    end = offset + len(old)
    starts_line = offset == 0 or text[offset - 1] == "\n"
    return starts_line and (old.endswith("\n") or end == len(text) or text[end] == "\n")


def _refuse_if_elsewhere(rel: str, text: str, old: str, offset: int) -> None:
    """old_text found only inside a line (e.g. an over-indented line found within a comment) while the same
    lines, whitespace aside, stand on their own elsewhere: which one the model meant is unknown, so refuse."""
    needle = _lines_of(old)
    words = next((line.split() for line in needle if line.strip()), [])
    # Any line equal to the first one, whitespace aside, holds its longest word: when that word occurs only
    # inside this hit, there is nowhere else to look (the usual case, checked without splitting the file).
    if not words or text.count(max(words, key=len)) <= old.count(max(words, key=len)):
        return
    first = _line_of(text, offset) - 1
    last = _line_of(text, offset + len(old.rstrip("\n"))) - 1
    match = _tolerant_match(split_lines(text), needle)
    elsewhere = [hit for hit in match[1] if hit > last or hit + len(needle) - 1 < first] if match else []
    if elsewhere:
        raise errors.AmbiguousEdit(rel, sorted([first + 1, *(hit + 1 for hit in elsewhere)]))


def _lines_of(text: str) -> list[str]:
    return [strip_eol(line) for line in split_lines(text)]


def _without_shared_blank_lines(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """Blank lines that begin or end both old_text and new_text are context the model quoted, not part of the
    edit: dropped from both, so a file without them at that spot still matches and none is added."""
    while len(old) > 1 and new and not old[-1].strip() and not new[-1].strip():
        old, new = old[:-1], new[:-1]
    while len(old) > 1 and new and not old[0].strip() and not new[0].strip():
        old, new = old[1:], new[1:]
    return old, new


def _tolerant_match(lines: list[str], needle: list[str]) -> tuple[str, list[int]] | None:
    """(level name, 0-based starts) at the first tolerance level that matches anything. More than one start
    is for the caller to refuse (unless replace_all): a looser level never chooses between places."""
    for name, normalize, _ in LEVELS[1:]:
        haystack = [normalize(strip_eol(line)) for line in lines]
        hits = non_overlapping(find_block(haystack, [normalize(line) for line in needle]), len(needle))
        if hits:
            return name, hits
    return None


def _replacement(new_lines: list[str], needle: list[str], block: list[str]) -> list[str]:
    """The lines replacing `block`: unchanged lines as the file has them (trailing whitespace included),
    changed ones re-indented like the file, the last ending as the block ended."""
    if not new_lines:
        return []
    new_lines = adapt(new_lines, needle, [strip_eol(line) for line in block])
    ending = "\n" if block[-1].endswith("\n") else ""
    return [line + "\n" for line in new_lines[:-1]] + [new_lines[-1] + ending]


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
