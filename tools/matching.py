"""Locating a block of lines tolerantly, shared by edit_file and apply_patch.

Levels go from strict to loose; a caller takes the first level that finds anything, so a loose level never
overrides an exact hit. When nothing matches, `closest_candidates` shows the model where the text probably is.
"""

from __future__ import annotations

import difflib
import heapq
from collections import Counter
from collections.abc import Callable


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


def closest_candidates(lines: list[str], needle: list[str], count: int = 2, max_shown: int = 12) -> str:
    """The file regions most similar to `needle`, numbered from 1, for an error message.

    Linear in the file, whatever the needle's size: regions are proposed by the needle's lines found verbatim
    (indentation aside), each voting for the start its position implies, and only the few best proposals are
    compared line by line with the needle. Only when no line is found verbatim are single lines compared
    character by character, for a few of the needle's lines.
    """
    stripped = [strip_eol(line).strip() for line in lines]
    wanted = [(offset, text) for offset, line in enumerate(needle) if (text := line.strip())]
    if not wanted or not lines:
        return ""
    starts = _starts_by_shared_lines(stripped, wanted) or _starts_by_similar_lines(stripped, wanted)
    size = len(needle)
    target = [text for _, text in wanted]
    wanted_counts = Counter(target)
    scored = []
    for start, hint in starts.items():
        window = Counter(line for line in stripped[max(0, start) : max(0, start) + size] if line)
        # Lines in common over lines in all (SequenceMatcher.quick_ratio, on lines): linear, where a full
        # line diff of two 800-line windows full of braces is quadratic.
        shared = 2 * sum((window & wanted_counts).values()) / (window.total() + len(target))
        scored.append((max(shared, hint), -start, max(0, start)))
    scored.sort(reverse=True)
    shown: list[str] = []
    used: list[int] = []
    for score, _, begin in scored:
        if score < MIN_SIMILARITY or any(abs(begin - other) < size for other in used) or len(used) == count:
            continue
        used.append(begin)
        end = min(len(lines), begin + min(size, max_shown))
        shown.append("\n".join(f"{n + 1:>6}\t{strip_eol(lines[n])}" for n in range(begin, end)))
    return "\n  ...\n".join(shown)


MIN_SIMILARITY = 0.3
PROPOSALS = 12  # regions compared in full with the needle
COMMON_LINE = 25  # a line found more often than this ("}", "return") says little about where the block is
SIMILAR_PROBES = 2  # needle lines compared character by character when none is found verbatim


def _starts_by_shared_lines(stripped: list[str], wanted: list[tuple[int, str]]) -> dict[int, float]:
    where: dict[str, list[int]] = {}
    texts = {text for _, text in wanted}
    for index, line in enumerate(stripped):
        if line in texts:
            where.setdefault(line, []).append(index)
    votes: Counter[int] = Counter()
    for offset, text in wanted:
        places = where.get(text, [])
        if len(places) <= COMMON_LINE:
            votes.update(index - offset for index in places)
    return {start: 0.0 for start, _ in votes.most_common(PROPOSALS)}


def _starts_by_similar_lines(stripped: list[str], wanted: list[tuple[int, str]]) -> dict[int, float]:
    """Starts implied by the file lines most similar to the needle's longest lines, with that similarity
    (the needle's lines may all differ a little from the file's: a stale copy, a typo). The cheap upper
    bound (quick_ratio) ranks every line; the exact ratio is computed for the best few only."""
    probes = sorted(wanted, key=lambda item: -len(item[1]))[:SIMILAR_PROBES]
    matcher = difflib.SequenceMatcher(autojunk=False)
    best: dict[int, float] = {}
    for offset, text in probes:
        matcher.set_seq2(text)
        bounds = []
        for index, line in enumerate(stripped):
            matcher.set_seq1(line)
            if matcher.real_quick_ratio() >= MIN_SIMILARITY:
                bounds.append((matcher.quick_ratio(), index))
        for _, index in heapq.nlargest(PROPOSALS, bounds):
            matcher.set_seq1(stripped[index])
            start = index - offset
            best[start] = max(best.get(start, 0.0), matcher.ratio())
    return dict(sorted(best.items(), key=lambda item: -item[1])[:PROPOSALS])
