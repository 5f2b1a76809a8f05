"""The suffix drafter: the next tokens of a request proposed from what it has already seen, without a model.

At each step the drafter looks for the longest suffix of the request's tokens (prompt + output so far), at least
`min_match` tokens long, that occurred earlier, and proposes the tokens that followed that occurrence (up to
`max_draft`). Two kinds of source are searched:

- the history itself (the request's own tokens), where an occurrence must end before the last token;
- documents: token sequences given apart, in practice the plain text of files the agent read. Our read_file shows
  files as numbered lines (`{n:>6}\\t{line}`), so a copy of a file from its read_file output stops at every line end
  (the next token in the history is a line number, in the output it is the next line's text); the file's plain text
  as a document keeps the copy going.

Which occurrence: the longest match over all sources; among equally long ones, documents before the history (the
last added first; a file's plain text goes on where the history's numbered copy of it turns to a line number), and
in each source the most recent occurrence (on the fixture of bench/speculative_acceptance.py, documents first on
ties made rewrites 14.8 tokens per step instead of 14.6 and edit_file calls 2.80 instead of 2.76).
An occurrence counts only with at least one token after it (so a document's last tokens never match: they have
nothing to propose). A draft from a document stops at the document's end. One from the history that reaches the
history's end goes on as LZ77's overlapping copies do: the occurrence ends p tokens before the end, so the text has
repeated with period p so far, and the draft goes on repeating it (a loop of one token drafts that token max_draft
times, not once). On the real edits of bench/speculative_acceptance.py this changes no figure by more than 0.01x;
in a loop it drafts whole drafts instead of p tokens a step.

Cost. Each source keeps a hash map from every `min_match`-gram to the end positions of its occurrences, extended as
tokens are appended: O(1) per appended token. The match found at one step is carried to the next: if the token
appended is the one its occurrence continued with, the match is one token longer and still the longest and most
recent (every occurrence of the longer suffix extends an occurrence of the shorter one, in the same order), so a
draft being accepted costs O(1) per token. Only when a match breaks is there a search: the occurrences of the last
`min_match` tokens, newest first, each rejected in O(1) unless it can beat the best so far (one token compared at
the best length, as zlib's match finder does) and the search stops as soon as one reaches the longest length
possible (the previous match's length + the tokens appended since). The result is exactly the brute-force scan's
(tests/model_runtime/test_speculative_drafter.py checks it against one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DraftConfig:
    """How a request drafts: the suffix drafter's parameters and the draft-length policy's (policy.py).

    min_match: the shortest suffix worth copying from (tokens); shorter repeats are too common to predict anything.
    max_draft: the most tokens one step verifies beyond the one it always yields (the full draft, K).
    probe: the draft length while a request has not just had a fully accepted draft.
    patience: drafts in a row of which no token was accepted before drafting stops for the request.
    retry_after: steps without drafting before one probe tries again (doubling after each failed retry).
    growth: after a draft of d tokens accepted whole, the next is min(max_draft, growth * (d + 1) - 1) (with 2 and
        a probe of 3: 3, 7, 15, 31, max_draft); 0: max_draft at once (issue 50's rule).
    """

    min_match: int = 4
    max_draft: int = 32
    probe: int = 3
    patience: int = 2
    retry_after: int = 16
    growth: int = 0

    def __post_init__(self) -> None:
        for name in ("min_match", "max_draft", "probe", "patience", "retry_after", "growth"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "growth" else 1):
                raise ValueError(
                    f"DraftConfig.{name} must be an integer >= {0 if name == 'growth' else 1}, got {value!r}"
                )
        if self.growth == 1:
            raise ValueError("DraftConfig.growth must be 0 (max_draft at once) or >= 2, got 1")
        if self.probe > self.max_draft:
            raise ValueError(f"DraftConfig.probe ({self.probe}) must not exceed max_draft ({self.max_draft})")


@dataclass(frozen=True)
class Match:
    """An earlier occurrence of the history's last `length` tokens: it ends before `end` in source `source` (0: the
    history, 1..: the documents in the order added), so the draft is that source's tokens from `end` on."""

    length: int
    source: int
    end: int


class _Source:
    """A token sequence and its index: each `size`-gram -> the positions its occurrences end at, ascending."""

    __slots__ = ("ends", "size", "tokens")

    def __init__(self, size: int) -> None:
        self.size = size
        self.tokens: list[int] = []
        self.ends: dict[tuple[int, ...], list[int]] = {}

    def extend(self, new: Iterable[int]) -> None:
        tokens, size, ends = self.tokens, self.size, self.ends
        start = len(tokens)
        tokens.extend(new)
        for end in range(max(start + 1, size), len(tokens) + 1):
            key = tuple(tokens[end - size : end])
            found = ends.get(key)
            if found is None:
                ends[key] = [end]
            else:
                found.append(end)


class SuffixDrafter:
    """Drafts for one request from its tokens and the documents added. Feed it every token the request gets
    (`extend`: the prompt, then each step's accepted tokens); `propose(n)` is the next draft, at most n tokens."""

    def __init__(self, config: DraftConfig | None = None, tokens: Iterable[int] = ()) -> None:
        self.config = config or DraftConfig()
        self._history = _Source(self.config.min_match)
        self._documents: list[_Source] = []
        # The match at history length `_matched_at` (None: the longest repeat there is shorter than min_match);
        # `_matched_at` None: not known (a document was added since, or nothing was asked yet).
        self._match: Match | None = None
        self._matched_at: int | None = 0
        self.extend(tokens)

    @property
    def tokens(self) -> Sequence[int]:
        return self._history.tokens

    def __len__(self) -> int:
        return len(self._history.tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        """Append tokens to the history (the matching is done lazily, when a draft is asked for)."""
        self._history.extend(tokens)

    def add_document(self, tokens: Iterable[int]) -> None:
        """Index another source to copy from (e.g. the plain text of a file the agent read)."""
        document = _Source(self.config.min_match)
        document.extend(tokens)
        self._documents.append(document)
        self._matched_at = None  # a new source can hold a longer match: search afresh

    def match(self) -> Match | None:
        """The longest earlier occurrence of the history's suffix (see the module docstring), or None."""
        length = len(self._history.tokens)
        if self._matched_at == length:
            return self._match
        bound = None  # the longest a match can be now
        if self._matched_at is not None:
            self._follow(length)
            if self._matched_at == length:
                return self._match
            known = self._match.length if self._match else self.config.min_match - 1
            bound = known + (length - self._matched_at)
        self._match = self._search(bound)
        self._matched_at = length
        return self._match

    def propose(self, limit: int | None = None) -> list[int]:
        """The draft: the tokens after the match's occurrence, at most min(limit, max_draft); [] without a match."""
        count = self.config.max_draft if limit is None else min(limit, self.config.max_draft)
        if count <= 0:
            return []
        found = self.match()
        if found is None:
            return []
        tokens = self._source(found.source).tokens
        draft = tokens[found.end : found.end + count]
        if found.source == 0 and len(draft) < count:  # the copy overlaps the present: it repeats with this period
            period = len(tokens) - found.end
            draft += [draft[index % period] for index in range(period, count)]
        return draft

    def _source(self, index: int) -> _Source:
        return self._history if index == 0 else self._documents[index - 1]

    def _follow(self, length: int) -> None:
        """Carry the known match over the tokens appended since, while each is the one its occurrence continued
        with (it stays the longest and most recent: module docstring). Stops at the first that is not."""
        assert self._matched_at is not None
        history = self._history.tokens
        while self._match is not None and self._matched_at < length:
            found = self._match
            source = self._source(found.source).tokens
            if found.end + 1 >= len(source) or source[found.end] != history[self._matched_at]:
                return  # broken, or at the source's end (an occurrence with nothing after it does not count)
            self._match = Match(found.length + 1, found.source, found.end + 1)
            self._matched_at += 1

    def _search(self, bound: int | None) -> Match | None:
        """The longest match over every source; ties to documents (the last added first), then to the history, and
        in a source to the most recent occurrence."""
        history = self._history.tokens
        size, length = self.config.min_match, len(history)
        if length < size:
            return None
        key = tuple(history[length - size :])
        best: Match | None = None
        best_length = size - 1
        documents = [(index, self._documents[index - 1]) for index in range(len(self._documents), 0, -1)]
        sources = [*documents, (0, self._history)]
        for index, source in sources:
            ends = source.ends.get(key)
            if not ends:
                continue
            tokens = source.tokens
            limit = len(tokens)  # an occurrence needs a token after it (in the history: it ends before the end)
            for end in reversed(ends):
                if end >= limit:
                    continue
                if best is not None:
                    # it beats the best only if it also matches at the best's length: one token says most often not
                    at = best_length
                    if at >= end or at >= length or tokens[end - 1 - at] != history[length - 1 - at]:
                        continue
                reach = min(end, length)
                common = size
                while common < reach and tokens[end - 1 - common] == history[length - 1 - common]:
                    common += 1
                if common > best_length:
                    best, best_length = Match(common, index, end), common
                    if bound is not None and common >= bound:
                        return best
        return best
