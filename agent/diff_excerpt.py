"""ACP `diff` content for a file a tool changed: whole texts for small files, excerpts for big ones.

ACP's diff carries the old and the new text of the file; for a big file that is one frame of twice its size,
more than the SDK's WebSocket client accepts (1 MiB). Beyond WHOLE_FILE_CHARS, each changed region with
CONTEXT_LINES of context becomes a diff of its own, its `_meta["warpcode/excerpt"]` saying that it is an
excerpt, at which lines of the old and new file it starts and how many lines each has in all. The excerpts of
one file share EXCERPT_CHARS: a region beyond that is cut (`"cut": true`) and later regions are only counted,
in a text line after the diffs. The display is what shrinks; the file itself and the model's view are whole.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

from acp import schema
from acp.helpers import text_block, tool_content, tool_diff_content

WHOLE_FILE_CHARS = 100_000  # old + new text sent whole up to this
CONTEXT_LINES = 3
EXCERPT_CHARS = 200_000  # old + new text of one file's excerpts
MATCHED_LINES = 4_000  # changed lines compared line by line into regions; beyond, one region (bounded time)
META_KEY = "warpcode/excerpt"

Region = tuple[int, int, int, int]  # old start, old end, new start, new end (0-based line indexes, ends excluded)


def diff_contents(path: str, old: str | None, new: str) -> list[Any]:
    """The tool call content showing the change of `path` (old None: a new file)."""
    if len(old or "") + len(new) <= WHOLE_FILE_CHARS:
        return [tool_diff_content(path, new, old)]
    old_lines, new_lines = (old or "").splitlines(keepends=True), new.splitlines(keepends=True)
    contents: list[Any] = []
    budget = EXCERPT_CHARS
    regions = changed_regions(old_lines, new_lines)
    for shown, region in enumerate(regions):
        if budget <= 0:
            note = f"{len(regions) - shown} more changed regions of {path} are not shown."
            contents.append(tool_content(text_block(note)))
            break
        diff, used = _excerpt(path, old is None, old_lines, new_lines, region, budget)
        contents.append(diff)
        budget -= used
    return contents


def changed_regions(old: list[str], new: list[str]) -> list[Region]:
    """The changed line ranges of two versions, each widened by CONTEXT_LINES, near ones merged."""
    start = _common_prefix(old, new)
    end = _common_suffix(old, new, start)
    old_end, new_end = len(old) - end, len(new) - end
    if (old_end - start) + (new_end - start) > MATCHED_LINES:
        changes = [(start, old_end, start, new_end)]
    else:
        matcher = SequenceMatcher(None, old[start:old_end], new[start:new_end], autojunk=False)
        changes = [(start + i1, start + i2, start + j1, start + j2)
                   for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]  # fmt: skip
    regions: list[Region] = []
    for o1, o2, n1, n2 in changes:
        if regions and o1 - regions[-1][1] <= 2 * CONTEXT_LINES:
            regions[-1] = (regions[-1][0], o2, regions[-1][2], n2)
        else:
            regions.append((o1, o2, n1, n2))
    return [_widened(region, len(old)) for region in regions]


def _widened(region: Region, old_count: int) -> Region:
    """The region with the unchanged lines around it (the same lines before and after in both versions)."""
    o1, o2, n1, n2 = region
    before, after = min(CONTEXT_LINES, o1), min(CONTEXT_LINES, old_count - o2)
    return o1 - before, o2 + after, n1 - before, n2 + after


def _excerpt(
    path: str, created: bool, old: list[str], new: list[str], region: Region, budget: int
) -> tuple[schema.FileEditToolCallContent, int]:
    o1, o2, n1, n2 = region
    old_text, new_text = "".join(old[o1:o2]), "".join(new[n1:n2])
    cut = len(old_text) + len(new_text) > budget
    if cut:
        old_share = budget * len(old_text) // (len(old_text) + len(new_text))
        old_text, new_text = _head(old_text, old_share), _head(new_text, budget - old_share)
    meta = {"oldStartLine": o1 + 1, "newStartLine": n1 + 1, "oldLines": len(old), "newLines": len(new), "cut": cut}
    diff = schema.FileEditToolCallContent(
        type="diff", path=path, old_text=None if created else old_text, new_text=new_text, field_meta={META_KEY: meta}
    )
    return diff, len(old_text) + len(new_text)


def _head(text: str, chars: int) -> str:
    """The first `chars` characters of `text`, ending at a line end when there is one."""
    head = text[:chars]
    return head[: head.rfind("\n") + 1] or head


def _common_prefix(old: list[str], new: list[str]) -> int:
    count, limit = 0, min(len(old), len(new))
    while count < limit and old[count] == new[count]:
        count += 1
    return count


def _common_suffix(old: list[str], new: list[str], prefix: int) -> int:
    count, limit = 0, min(len(old), len(new)) - prefix
    while count < limit and old[-1 - count] == new[-1 - count]:
        count += 1
    return count
