r"""Applying the hunks of one file in memory: located by their context, tolerantly, and never guessed.

A hunk goes where its line numbers say when its old lines are there; else wherever its old lines are found,
if that is one place. When they match several places (the context repeats in the file) and the line numbers
do not point at one of them, the hunk is refused with the candidates' line numbers: picking the nearest would
silently edit the wrong function whenever the numbers are wrong, which is how models write them. A place
counts as a candidate at the loosest whitespace level, so a block found verbatim once is still ambiguous when
the same block, indented differently, is elsewhere too (context with stripped indentation). A hunk marked
"\ No newline at end of file" can only apply at the end of the file.
"""

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
        return exact, []
    lines = split_lines(text)
    notes: list[str] = []
    drift = 0  # how far the actual positions have moved from the header's line numbers
    floor = 0  # hunks apply in order and never overlap
    anchored = False  # has a hunk been placed, so that `drift` is measured and not just the header's word?
    for number, hunk in enumerate(hunks, 1):
        old = hunk.old_lines
        expected = _expected_index(hunk, drift, len(lines))
        if old:
            position, size, how = _locate(lines, hunk, expected if anchored else None, floor, shown, number)
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
        elif hunk.old_start is None and lines:
            raise PatchError(
                "the hunk only adds lines and has no line numbers, so nothing says where; "
                "add a few unchanged lines around it as context.",
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
        anchored = anchored or bool(old)
        if hunk.old_start is not None:
            drift = floor - (_header_index(hunk) + (hunk.old_count or 0))
    return "".join(lines), notes


def _apply_verbatim(text: str, hunks: list[Hunk]) -> str | None:
    """Fast path for the common case (a diff made from this very file), every hunk's old lines verbatim where
    its line numbers say: str.find on the whole text instead of splitting a large file into lines. None when
    any hunk needs the line-based search."""
    pieces: list[str] = []
    cursor = cursor_line = 0
    for hunk in hunks:
        if hunk.old_start is None:
            return None
        expected = _header_index(hunk)
        if not hunk.old_lines:  # a pure addition (zero context): it goes where its numbers say
            position = None if _at_end_only(hunk) else _line_offset(text, cursor, expected - cursor_line)
            if position is None:
                return None
            pieces += [text[cursor:position], "".join(line + "\n" for line in hunk.new_lines)]
            cursor, cursor_line = position, expected
            continue
        block = "\n".join(hunk.old_lines) + ("" if hunk.old_no_eol else "\n")
        position = text.find(block, cursor)
        while position != -1:
            line = cursor_line + text.count("\n", cursor, position)
            at_line_start = position == 0 or text[position - 1] == "\n"
            if line > expected or (line == expected and at_line_start):
                break
            position = text.find(block, position + 1)
        if position == -1 or line != expected or (_at_end_only(hunk) and position + len(block) != len(text)):
            return None  # elsewhere or nowhere: the line-based search weighs the candidates
        new_lines = hunk.new_lines
        replacement = "\n".join(new_lines) + ("" if hunk.new_no_eol or not new_lines else "\n")
        pieces += [text[cursor:position], replacement]
        cursor, cursor_line = position + len(block), expected + len(hunk.old_lines)
    pieces.append(text[cursor:])
    return "".join(pieces)


def _line_offset(text: str, start: int, lines: int) -> int | None:
    """The offset in `text` of the line `lines` lines after the one starting at `start`; None when that is before
    `start` or past the last full line."""
    if lines < 0:
        return None
    position = start
    for _ in range(lines):
        newline = text.find("\n", position)
        if newline == -1:
            return None
        position = newline + 1
    return position


def _at_end_only(hunk: Hunk) -> bool:
    """A hunk whose old or new side ends without a newline is about the file's last line."""
    return hunk.old_no_eol or hunk.new_no_eol


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


def _locate(
    lines: list[str], hunk: Hunk, expected: int | None, floor: int, shown: str, number: int
) -> tuple[int, int, str]:
    """(index, number of file lines matched, how) of the hunk's old lines; -1 if none; refused if ambiguous.

    `expected` is where the line numbers put the hunk, corrected by the offset at which an earlier hunk was
    found; None when no earlier hunk confirms them. Numbers that nothing confirms do not choose among several
    places: this path only runs when some hunk is not verbatim at its numbers, so they are known to be off
    somewhere, and a shifted header can point exactly at a twin of the block it meant.

    Tolerance grows step by step: exact, then whitespace levels, then dropping up to MAX_FUZZ context lines
    at each end (stale context), and the first step that finds anything wins; see the module's docstring for
    how one place is chosen among several.
    """
    old = hunk.old_lines
    size = len(old)
    numbered = hunk.old_start is not None and expected is not None
    fits_end = numbered and (not _at_end_only(hunk) or expected + size == len(lines))
    if (
        numbered
        and fits_end
        and expected >= floor
        and [strip_eol(line) for line in lines[expected : expected + size]] == old
    ):
        return expected, size, "exact"
    for fuzz in range(MAX_FUZZ + 1):
        head = _droppable(hunk.lines, fuzz)
        tail = _droppable(list(reversed(hunk.lines)), fuzz)
        if (fuzz and head + tail == 0) or head + tail >= size:
            continue
        needle = old[head : size - tail]
        for level, (name, normalize, _) in enumerate(LEVELS):
            hits = _hits(lines, needle, normalize, floor, head, tail, _at_end_only(hunk))
            if not hits:
                continue
            places = (
                hits
                if level == len(LEVELS) - 1
                else _hits(lines, needle, LEVELS[-1][1], floor, head, tail, _at_end_only(hunk))
            )
            if len(places) > 1:
                if not (numbered and expected + head in hits):
                    raise _ambiguous(places, head, hunk, shown, number)
                best = expected + head
            else:
                best = hits[0]
            how = name if not fuzz else f"{name}, without {head + tail} stale context line(s)"
            return best - head, len(needle) + head + tail, how
    return -1, 0, ""


def _hits(lines: list[str], needle: list[str], normalize, floor: int, head: int, tail: int, at_end: bool) -> list[int]:
    haystack = [normalize(strip_eol(line)) for line in lines]
    hits = find_block(haystack, [normalize(line) for line in needle], floor + head)
    if at_end:
        return [hit for hit in hits if hit + len(needle) + tail == len(lines)]
    return [hit for hit in hits if hit + len(needle) + tail <= len(lines)]


def _ambiguous(places: list[int], head: int, hunk: Hunk, shown: str, number: int) -> PatchError:
    where = ", ".join(str(place - head + 1) for place in places[:10]) + (", ..." if len(places) > 10 else "")
    numbers = "its line numbers point at none of them" if hunk.old_start is not None else "it has no line numbers"
    return PatchError(
        f"its context and '-' lines match {len(places)} places (starting at lines {where}) and {numbers}; "
        "add unchanged lines that tell them apart, or correct the @@ line numbers.",
        shown,
        number,
        hunk.header,
    )


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
