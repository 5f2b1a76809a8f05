"""Locating a block of lines tolerantly, shared by edit_file and apply_patch.

Levels go from strict to loose; a caller takes the first level that finds anything, so a loose level never
overrides an exact hit. When nothing matches, `closest_candidates` shows the model where the text probably is.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

_LEADING_WS = re.compile(r"[ \t]*")


def strip_eol(line: str) -> str:
    return line[:-1] if line.endswith("\n") else line


def _collapse(line: str) -> str:
    return " ".join(line.split())


# (name, normalizer, whether the indentation of the replacement must be adapted)
LEVELS: tuple[tuple[str, Callable[[str], str], bool], ...] = (
    ("exact", lambda line: line, False),
    ("ignoring trailing whitespace", str.rstrip, False),
    ("ignoring indentation", str.strip, True),
    ("ignoring all whitespace differences", _collapse, True),
)


def find_block(haystack: list[str], needle: list[str], start: int = 0) -> list[int]:
    """Every index i >= start with haystack[i:i+len(needle)] == needle (both already normalized)."""
    size = len(needle)
    if size == 0:
        return []
    first = needle[0]
    hits = []
    for index in range(start, len(haystack) - size + 1):
        if haystack[index] == first and haystack[index : index + size] == needle:
            hits.append(index)
    return hits


def non_overlapping(hits: list[int], size: int) -> list[int]:
    kept: list[int] = []
    for hit in hits:
        if not kept or hit >= kept[-1] + size:
            kept.append(hit)
    return kept


def indentation(line: str) -> str:
    match = _LEADING_WS.match(line)
    return match.group(0) if match else ""


def reindent(new_lines: list[str], old_lines: list[str], found_lines: list[str]) -> list[str]:
    """Re-indent `new_lines` (written like `old_lines`) the way the file indents (`found_lines`).

    Line pairs of old and found give a map of indentation widths; widths not in it follow the line through
    the known pairs (a uniform shift with one pair, a shift and scale such as 2 -> 4 spaces with two).
    """
    pairs: dict[int, str] = {}
    for old, found in zip(old_lines, found_lines, strict=False):
        if old.strip() and found.strip():
            pairs.setdefault(len(indentation(old)), indentation(found))
    if all(len(found) == width and found == " " * width for width, found in pairs.items()):
        return new_lines
    known = sorted(pairs)
    unit = "\t" if any("\t" in found for found in pairs.values()) else " "
    shifted = []
    for line in new_lines:
        body = line.lstrip(" \t")
        if not body:
            shifted.append(line)
            continue
        width = len(line) - len(body)
        if width in pairs:
            shifted.append(pairs[width] + body)
            continue
        base = max((w for w in known if w <= width), default=known[0])
        scale = 1.0
        if len(known) > 1:
            low, high = known[0], known[-1]
            scale = (len(pairs[high]) - len(pairs[low])) / (high - low)
        target = max(0, round(len(pairs[base]) + (width - base) * scale))
        shifted.append(unit * target + body)
    return shifted


def closest_candidates(lines: list[str], needle: list[str], count: int = 2, max_shown: int = 12) -> str:
    """The file regions most similar to `needle`, numbered from 1, for an error message."""
    wanted = [line.strip() for line in needle if line.strip()]
    if not wanted or not lines:
        return ""
    stripped = [line.strip() for line in lines]
    anchor = difflib.SequenceMatcher(autojunk=False)
    anchor.set_seq2(wanted[0])
    scored = []
    for index, line in enumerate(stripped):
        anchor.set_seq1(line)
        if anchor.real_quick_ratio() >= 0.4 and anchor.quick_ratio() >= 0.4:
            scored.append((anchor.ratio(), index))
    scored.sort(reverse=True)
    offset = next(i for i, line in enumerate(needle) if line.strip())
    size = len(needle)
    target = "\n".join(wanted)
    windows = []
    for _, index in scored[:10]:
        begin = max(0, index - offset)
        window = "\n".join(line for line in stripped[begin : begin + size] if line)
        windows.append((difflib.SequenceMatcher(None, window, target, autojunk=False).ratio(), begin))
    windows.sort(reverse=True)
    shown: list[str] = []
    used: list[int] = []
    for ratio, begin in windows:
        if ratio < 0.3 or any(abs(begin - other) < size for other in used) or len(used) == count:
            continue
        used.append(begin)
        end = min(len(lines), begin + min(size, max_shown))
        shown.append("\n".join(f"{n + 1:>6}\t{strip_eol(lines[n])}" for n in range(begin, end)))
    return "\n  ...\n".join(shown)
