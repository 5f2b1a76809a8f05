"""Applying the hunks of one file in memory: located by context near their line numbers, tolerantly."""

from __future__ import annotations

from warpcode.tools.errors import PatchError
from warpcode.tools.matching import LEVELS, closest_candidates, find_block, strip_eol
from warpcode.tools.patch_parse import Hunk
from warpcode.tools.textcodec import display, split_lines

MAX_FUZZ = 2  # context lines that may be dropped from each end of a hunk, as GNU patch's default fuzz


def apply_hunks(text: str, hunks: list[Hunk], shown: str) -> tuple[str, list[str]]:
    """The text after all hunks, and notes on hunks applied at an offset or tolerantly."""
    exact = _apply_verbatim(text, hunks)
    if exact is not None:
        return exact
    lines = split_lines(text)
    notes: list[str] = []
    drift = 0  # how far the actual positions have moved from the header's line numbers
    floor = 0  # hunks apply in order and never overlap
    for number, hunk in enumerate(hunks, 1):
        old = hunk.old_lines
        expected = _expected_index(hunk, drift, len(lines))
        if old:
            position, size, how = _locate(lines, hunk, expected, floor)
            if position < 0:
                candidates = display(closest_candidates(lines, old))
                where = f" The closest lines in the file are:\n{candidates}" if candidates else ""
                raise PatchError(
                    "its context and '-' lines are not in the file, not even ignoring whitespace."
                    f"{where}\nRead the file again and regenerate the hunk from its current content.",
                    shown,
                    number,
                    hunk.header,
                )
        else:
            position, size, how = max(floor, min(expected, len(lines))), 0, "exact"
        found = lines[position : position + size]
        replacement = _replacement(found, hunk, size, _written_without_cr(found, old))
        if how != "exact":
            notes.append(f"hunk {number} matched {how}")
        elif hunk.old_start is not None and position != expected:
            notes.append(f"hunk {number} applied at line {position + 1} (offset {position - expected:+d})")
        lines[position : position + size] = replacement
        floor = position + len(replacement)
        if hunk.old_start is not None:
            drift = floor - (_header_index(hunk) + (hunk.old_count or 0))
    return "".join(lines), notes


def _apply_verbatim(text: str, hunks: list[Hunk]) -> tuple[str, list[str]] | None:
    """Fast path for the common case, every hunk's old lines present verbatim: str.find on the whole text
    instead of splitting a large file into lines. None when any hunk needs the line-based search."""
    pieces: list[str] = []
    notes: list[str] = []
    cursor = cursor_line = drift = 0
    for number, hunk in enumerate(hunks, 1):
        if not hunk.old_lines or hunk.old_start is None:
            return None
        block = "\n".join(hunk.old_lines) + ("" if hunk.old_no_eol else "\n")
        expected = _header_index(hunk) + drift
        best: tuple[int, int] | None = None
        position = text.find(block, cursor)
        while position != -1:
            at_line_start = position == 0 or text[position - 1] == "\n"
            if at_line_start and (not hunk.old_no_eol or position + len(block) == len(text)):
                line = cursor_line + text.count("\n", cursor, position)
                if best is None or abs(line - expected) < abs(best[1] - expected):
                    best = (position, line)
                if line >= expected:
                    break  # later hits are only farther away
            position = text.find(block, position + 1)
        if best is None:
            return None
        position, line = best
        new_lines = hunk.new_lines
        replacement = "\n".join(new_lines) + ("" if hunk.new_no_eol or not new_lines else "\n")
        pieces += [text[cursor:position], replacement]
        if line != expected:
            notes.append(f"hunk {number} applied at line {line + 1} (offset {line - expected:+d})")
        cursor, cursor_line = position + len(block), line + len(hunk.old_lines)
        drift = line - _header_index(hunk)
    pieces.append(text[cursor:])
    return "".join(pieces), notes


def _header_index(hunk: Hunk) -> int:
    """0-based index where the header says the hunk starts: "-5,0" inserts after line 5; "-5,3" starts at 5."""
    assert hunk.old_start is not None
    return hunk.old_start if hunk.old_count == 0 else max(hunk.old_start - 1, 0)


def _expected_index(hunk: Hunk, drift: int, total: int) -> int:
    if hunk.old_start is None:
        return 0
    return max(0, min(_header_index(hunk) + drift, total))


def _written_without_cr(found: list[str], old: list[str]) -> bool:
    """Did the hunk quote CRLF lines of the file without their CR (as models write diffs)? Then the lines it
    adds get CRLF too; a diff generated from the file itself carries the CRs and is applied byte for byte."""
    return any(line.endswith("\r\n") and not quoted.endswith("\r") for line, quoted in zip(found, old, strict=False))


def _locate(lines: list[str], hunk: Hunk, expected: int, floor: int) -> tuple[int, int, str]:
    """(index, number of file lines matched, how) of the hunk's old lines nearest to `expected`; -1 if none.

    Tolerance grows step by step: exact, then whitespace levels, then dropping up to MAX_FUZZ context lines
    at each end (stale context), and the first step that finds anything wins.
    """
    old = hunk.old_lines
    size = len(old)
    if expected >= floor and [strip_eol(line) for line in lines[expected : expected + size]] == old:
        return expected, size, "exact"
    for fuzz in range(MAX_FUZZ + 1):
        head = _droppable(hunk.lines, fuzz)
        tail = _droppable(list(reversed(hunk.lines)), fuzz)
        if (fuzz and head + tail == 0) or head + tail >= size:
            continue
        needle = old[head : size - tail]
        for name, normalize, _ in LEVELS:
            haystack = [normalize(strip_eol(line)) for line in lines]
            hits = [
                hit
                for hit in find_block(haystack, [normalize(line) for line in needle], floor + head)
                if hit + len(needle) + tail <= len(lines)
            ]
            if hits:
                best = min(hits, key=lambda hit: abs(hit - head - expected))
                how = name if not fuzz else f"{name}, without {head + tail} stale context line(s)"
                return best - head, len(needle) + head + tail, how
    return -1, 0, ""


def _droppable(tagged: list[tuple[str, str]], wanted: int) -> int:
    count = 0
    for tag, _ in tagged:
        if tag != " " or count == wanted:
            break
        count += 1
    return count


def _replacement(found: list[str], hunk: Hunk, size: int, to_crlf: bool) -> list[str]:
    """New lines for the matched region: context lines keep the file's own text, '+' lines come from the hunk."""
    out: list[str] = []
    old_index = 0
    last_new = max((i for i, (tag, _) in enumerate(hunk.lines) if tag != "-"), default=-1)
    for i, (tag, text) in enumerate(hunk.lines):
        if tag == "-":
            old_index += 1
            continue
        if tag == " " and old_index < size and old_index < len(found):
            out.append(found[old_index])
            old_index += 1
            continue
        if tag == " ":
            old_index += 1
        ending = "" if i == last_new and hunk.new_no_eol else ("\r\n" if to_crlf else "\n")
        out.append(text + ending)
    return out
