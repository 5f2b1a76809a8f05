"""repo_map: the repository's most important definitions, ranked by how the code references them.

Files are nodes; a file referencing an identifier defined in another file adds an edge to it, weighted by
how often and how telling the identifier is. Personalized PageRank (biased toward the focus files) ranks
files; each file's rank flows along its edges to (file, identifier) definitions; the best definitions are
rendered within the token budget (4 characters per token).
"""

from __future__ import annotations

import builtins
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

from warpcode.tools import errors
from warpcode.tools.pagerank import pagerank
from warpcode.tools.tag_cache import MAX_SOURCE_BYTES, TagCache
from warpcode.tools.tags import IMPORT, Definition, FileTags
from warpcode.tools.workspace import Workspace

CHARS_PER_TOKEN = 4
MIN_LINE_CHARS = 8
# A name defined in more than this many files (get, run, forward...) says nothing about which one a reference means;
# Aider only down-weights such names, dropping them keeps the graph small enough to rank in well under a second.
MAX_DEFINERS = 10
# Calling str() or len() in Python means the builtin, not a method that happens to share its name.
BUILTIN_NAMES = frozenset(dir(builtins))
DEFAULT_MAX_TOKENS = 2048
_DESCRIPTIVE = re.compile(r"^(?=.{8,})([a-z0-9]+_[a-z0-9_]+|[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*)$")


@dataclass
class RepoMap:
    text: str
    files: int  # source files considered
    definitions_shown: int
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        return "\n".join([self.text or "(no definitions found)", *self.notes])


def repo_map(
    ws: Workspace, focus: list[str] | None = None, max_tokens: int = DEFAULT_MAX_TOKENS, glob: str | None = None
) -> RepoMap:
    """`focus`: workspace paths (ranking is personalized to them) and/or identifiers (their edges weigh more).
    `glob` (as in search: `*.py`, `*.{c,h}`, `!test/**`) limits the map to matching files."""
    if max_tokens < 64:
        raise errors.InvalidArgument(f"max_tokens must be at least 64, got {max_tokens}.")
    cache = TagCache(ws)
    tags = cache.collect(glob)
    focus_files, focus_names = _split_focus(ws, focus or [], tags)
    ranked = rank_definitions(tags, focus_files, focus_names)
    text, shown = _fit(ranked, tags, max_tokens * CHARS_PER_TOKEN)
    notes = []
    if cache.skipped_large:
        notes.append(f"[{len(cache.skipped_large)} source files over {MAX_SOURCE_BYTES} bytes were not mapped.]")
    if shown < len(ranked):
        notes.append(f"[Showing the top {shown} of {len(ranked)} ranked definitions; raise max_tokens for more.]")
    return RepoMap(text, len(tags), shown, notes)


def _split_focus(ws: Workspace, focus: list[str], tags: dict[str, FileTags]) -> tuple[set[str], set[str]]:
    files, names = set(), set()
    for item in focus:
        try:
            rel = ws.rel(ws.resolve(item))
        except errors.ToolError:
            rel = None
        if rel in tags:
            files.add(rel)
        elif rel is not None and (ws.root / rel).is_dir():
            files.update(path for path in tags if path.startswith(rel + "/"))
        else:
            names.add(item)
    return files, names


def rank_definitions(
    tags: dict[str, FileTags], focus_files: set[str], focus_names: set[str]
) -> list[tuple[str, str, float]]:
    """(file, identifier, rank) of every referenced definition, best first."""
    definers: dict[str, set[str]] = defaultdict(set)
    for rel, file_tags in tags.items():
        for name in file_tags.names():
            definers[name].add(rel)
    edges: dict[tuple[str, str], float] = defaultdict(float)
    weights: dict[str, list[tuple[str, float]]] = defaultdict(list)  # source -> (name, weight) per reference
    out_weight: dict[str, float] = defaultdict(float)
    importance: dict[str, float] = {}
    for rel, file_tags in tags.items():
        for name, count in file_tags.references.items():
            targets = definers.get(name)
            if not targets or (len(targets) > MAX_DEFINERS and name not in focus_names):
                continue
            if name not in importance:
                importance[name] = _importance(name, len(targets), focus_names)
            weight = importance[name] * math.sqrt(count)
            weights[rel].append((name, weight))
            out_weight[rel] += weight * len(targets)
            for target in targets:
                edges[(rel, target)] += weight
    ranks = pagerank(edges, sorted(tags), dict.fromkeys(focus_files, 1.0))
    # Each file's rank flows out along its edges; every definer of a name receives the same flow for it.
    flow: dict[str, float] = defaultdict(float)
    for source, named in weights.items():
        share = ranks[source] / out_weight[source]
        for name, weight in named:
            flow[name] += share * weight
    scored = [(rel, name, score) for name, score in flow.items() for rel in definers[name] if rel not in focus_files]
    scored.sort(key=lambda item: (-item[2], item[0], item[1]))
    return scored


def _importance(name: str, definer_count: int, focus_names: set[str]) -> float:
    """Descriptive names say more than `x` or `get`; names defined everywhere say little (as in Aider)."""
    weight = 1.0
    if name in focus_names:
        weight *= 10.0
    if _DESCRIPTIVE.match(name):
        weight *= 10.0
    if name.startswith("_") or name in BUILTIN_NAMES:
        weight *= 0.1
    if definer_count > 5:
        weight *= 0.1
    return weight


def _render(selected: list[tuple[str, str, float]], tags: dict[str, FileTags]) -> str:
    by_file: dict[str, set[str]] = {}
    for rel, name, _ in selected:
        by_file.setdefault(rel, set()).add(name)
    blocks = []
    for rel, names in by_file.items():
        definitions: list[Definition] = [d for d in tags[rel].definitions if d.name in names and d.kind != IMPORT]
        lines = [f"{d.start_line:>5}│{d.signature}" for d in definitions]
        blocks.append(f"{rel}:\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def _fit(ranked: list[tuple[str, str, float]], tags: dict[str, FileTags], max_chars: int) -> tuple[str, int]:
    """The longest prefix of `ranked` whose rendering fits in `max_chars` (binary search on its length)."""
    # Every rendered definition takes at least a line number, a bar and a newline: that bounds the search.
    low, high, best = 0, min(len(ranked), max_chars // MIN_LINE_CHARS), ("", 0)
    while low <= high:
        middle = (low + high) // 2
        text = _render(ranked[:middle], tags)
        if len(text) <= max_chars:
            best = (text, middle)
            low = middle + 1
        else:
            high = middle - 1
    return best
