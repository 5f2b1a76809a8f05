"""The suffix drafter and the draft-length policy (model_runtime/speculative/): the drafter's drafts are exactly a
brute-force scan's, however the tokens arrive; a long accepted copy never searches; the policy's lengths follow its
rules step by step."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warpcode.model_runtime.speculative import DraftConfig, DraftPolicy, Match, SuffixDrafter


def reference(history: list[int], documents: list[list[int]], config: DraftConfig) -> tuple[Match | None, list[int]]:
    """Brute force: every earlier end position of every source, the longest common suffix with the history;
    documents from the last added, then the history, each newest first; ties keep the first. A draft from the
    history that runs into its end copies on from the tokens it drafted (LZ77's overlapping copy)."""
    n = len(history)
    sources = [(index + 1, documents[index]) for index in reversed(range(len(documents)))] + [(0, history)]
    best: Match | None = None
    for index, tokens in sources:
        for end in range(len(tokens) - 1, 0, -1):  # a token must follow the occurrence
            common = 0
            while common < min(end, n) and tokens[end - 1 - common] == history[n - 1 - common]:
                common += 1
            if common >= config.min_match and (best is None or common > best.length):
                best = Match(common, index, end)
    if best is None:
        return None, []
    if best.source != 0:
        return best, documents[best.source - 1][best.end : best.end + config.max_draft]
    copied = list(history)
    for position in range(best.end, best.end + config.max_draft):  # one token at a time, overlapping allowed
        copied.append(copied[position])
    return best, copied[n:]


configs = st.builds(DraftConfig, min_match=st.integers(1, 6), max_draft=st.integers(1, 12), probe=st.just(1))
random_tokens = st.lists(st.integers(0, 40), max_size=160)
repetitive_tokens = st.lists(st.integers(0, 2), max_size=160)


@st.composite
def copied_tokens(draw: st.DrawFn) -> list[int]:
    """Text made of copies of its own earlier pieces with small changes, as edits are."""
    tokens = draw(st.lists(st.integers(0, 9), min_size=1, max_size=20))
    for _ in range(draw(st.integers(0, 8))):
        start = draw(st.integers(0, len(tokens) - 1))
        piece = tokens[start : start + draw(st.integers(1, 30))]
        if draw(st.booleans()):
            piece = [*piece, draw(st.integers(0, 9))]
        tokens += piece
    return tokens


sequences = st.one_of(random_tokens, repetitive_tokens, copied_tokens())


@settings(max_examples=300, deadline=None)
@given(config=configs, tokens=sequences, documents=st.lists(sequences, max_size=3))
def test_drafts_are_the_brute_force_scans_at_every_length(
    config: DraftConfig, tokens: list[int], documents: list[list[int]]
) -> None:
    drafter = SuffixDrafter(config)
    for document in documents:
        drafter.add_document(document)
    for length in range(len(tokens) + 1):
        if length:
            drafter.extend([tokens[length - 1]])
        want_match, want_draft = reference(tokens[:length], documents, config)
        assert drafter.match() == want_match, (length, tokens[:length])
        assert drafter.propose() == want_draft


@settings(max_examples=200, deadline=None)
@given(
    config=configs,
    tokens=sequences,
    documents=st.lists(sequences, max_size=2),
    cuts=st.lists(st.integers(0, 160), max_size=8),
    asked=st.lists(st.booleans(), min_size=9, max_size=9),
    late_document=st.booleans(),
)
def test_tokens_in_any_chunks_draft_as_a_drafter_built_at_once(
    config: DraftConfig,
    tokens: list[int],
    documents: list[list[int]],
    cuts: list[int],
    asked: list[bool],
    late_document: bool,
) -> None:
    """Chunks of any size, drafts asked after some of them only, a document added midway: each draft is the one a
    drafter built from scratch on the same tokens gives, and the brute force's."""
    bounds = sorted({0, len(tokens), *(cut for cut in cuts if cut < len(tokens))})
    early, late = (documents[:1], documents[1:]) if late_document else (documents, [])
    incremental = SuffixDrafter(config)
    for document in early:
        incremental.add_document(document)
    for number, (begin, end) in enumerate(itertools.pairwise(bounds)):
        incremental.extend(tokens[begin:end])
        if number == len(bounds) // 2:
            for document in late:
                incremental.add_document(document)
        if asked[number % len(asked)] or end == len(tokens):
            added = early + (late if number >= len(bounds) // 2 else [])
            fresh = SuffixDrafter(config, tokens[:end])
            for document in added:
                fresh.add_document(document)
            assert incremental.propose() == fresh.propose() == reference(tokens[:end], added, config)[1]
            assert incremental.match() == fresh.match()


def test_edge_cases() -> None:
    config = DraftConfig(min_match=3, max_draft=4, probe=2)
    assert SuffixDrafter(config).propose() == [] and SuffixDrafter(config).match() is None  # empty history
    assert SuffixDrafter(config, [1, 2]).propose() == []  # shorter than min_match
    assert SuffixDrafter(config, list(range(20))).propose() == []  # nothing repeats
    assert SuffixDrafter(config, [1, 2, 3, 9, 1, 2]).propose() == []  # a repeat shorter than min_match
    # The suffix [1, 2, 3] occurred at the start: the draft is what followed, cut at max_draft, or at `limit`.
    drafter = SuffixDrafter(config, [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3])
    assert drafter.match() == Match(3, 0, 3)
    assert drafter.propose() == [4, 5, 6, 7]
    assert drafter.propose(2) == [4, 5] and drafter.propose(0) == [] and drafter.propose(99) == [4, 5, 6, 7]
    # A match ending right before the end: the history repeats with period 1, and the draft repeats it.
    assert SuffixDrafter(config, [7, 7, 7, 7]).match() == Match(3, 0, 3)
    assert SuffixDrafter(config, [7, 7, 7, 7]).propose() == [7] * config.max_draft  # a loop goes on looping
    # The longest match wins over a more recent shorter one; the most recent among equally long ones.
    assert SuffixDrafter(config, [0, 1, 2, 3, 10, 5, 1, 2, 3, 11, 0, 1, 2, 3]).propose() == [10, 5, 1, 2]
    assert SuffixDrafter(config, [1, 2, 3, 10, 1, 2, 3, 11, 1, 2, 3]).propose() == [11, 1, 2, 3]


def test_documents_keep_a_copy_going_where_the_history_has_line_numbers() -> None:
    """The history shows a file as read_file does (a line number before each line); its plain text as a document
    carries a copy of the file across line ends."""
    config = DraftConfig(min_match=2, max_draft=5, probe=1)
    numbered = [101, 10, 11, 12, 13, 99, 102, 20, 21, 22, 99, 103, 30, 31, 99]  # "     1\t<line>\n     2\t..."
    plain = [10, 11, 12, 13, 99, 20, 21, 22, 99, 30, 31, 99]
    drafter = SuffixDrafter(config, [*numbered, 10, 11, 12, 13, 99])  # the model has copied line one
    assert drafter.propose() == [102, 20, 21, 22, 99]  # from the history: a line number next, which is wrong
    drafter.add_document(plain)
    assert drafter.match() == Match(5, 1, 5)  # as long as the history's: the document goes first
    assert drafter.propose() == [20, 21, 22, 99, 30]
    drafter.extend([20])  # the copy goes on: the history has [99, 20] nowhere, the document has
    assert drafter.match() == Match(6, 1, 6)
    assert drafter.propose() == [21, 22, 99, 30, 31]
    without = SuffixDrafter(config, [*numbered, 10, 11, 12, 13, 99, 20])
    assert without.propose() == []


def test_documents_order_and_ends() -> None:
    config = DraftConfig(min_match=2, max_draft=3, probe=1)
    drafter = SuffixDrafter(config, [1, 2])
    drafter.add_document([1, 2, 30])
    drafter.add_document([1, 2, 40])
    assert drafter.propose() == [40]  # equally long: the last added document first
    drafter = SuffixDrafter(config, [7, 1, 2])
    drafter.add_document([7, 1, 2, 30])
    drafter.add_document([1, 2, 40])
    assert drafter.propose() == [30]  # the longest match first, in whichever document
    drafter = SuffixDrafter(config, [1, 2, 60, 1, 2])
    drafter.add_document([1, 2, 30])
    assert drafter.propose() == [30]  # equally long: a document before the history
    drafter = SuffixDrafter(config, [5, 1, 2, 60, 5, 1, 2])
    drafter.add_document([1, 2, 30])
    assert drafter.propose() == [60, 5, 1]  # a longer match in the history
    drafter = SuffixDrafter(config, [1, 2])
    drafter.add_document([9, 9, 1, 2])  # the document's last tokens: nothing follows them, no match
    assert drafter.propose() == []


def test_an_accepted_copy_never_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Copying a long text costs O(1) per token: the match is carried, no search runs while the draft is right."""
    generator = random.Random(0)
    text = [generator.randrange(50) for _ in range(3000)]
    drafter = SuffixDrafter(DraftConfig(min_match=4, max_draft=32), text)
    searches = []
    search = SuffixDrafter._search
    monkeypatch.setattr(SuffixDrafter, "_search", lambda self, bound: searches.append(bound) or search(self, bound))
    drafter.extend(text[:4])
    copied = 4
    while copied < 2000:
        draft = drafter.propose()
        assert draft == text[copied : copied + len(draft)] and draft
        drafter.extend(text[copied : copied + len(draft) + 1])  # the draft and the model's token after it
        copied += len(draft) + 1
    assert len(searches) == 1  # the first draft's


def test_config_is_validated() -> None:
    for bad in ({"min_match": 0}, {"max_draft": 0}, {"probe": 0}, {"patience": 0}, {"retry_after": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DraftConfig(**bad)
    with pytest.raises(ValueError, match="probe"):
        DraftConfig(max_draft=4, probe=5)
    with pytest.raises(ValueError, match="growth"):
        DraftConfig(growth=1)
    with pytest.raises(ValueError, match="min_match"):
        DraftConfig(min_match=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_match"):
        DraftConfig(min_match=True)


def lengths(policy: DraftPolicy, steps: list[tuple[int, int]]) -> list[int]:
    """The length asked for before each step, and after the last."""
    asked = [policy.length()]
    for drafted, accepted in steps:
        policy.update(drafted, accepted)
        asked.append(policy.length())
    return asked


def test_policy_full_after_a_whole_acceptance_else_a_probe() -> None:
    policy = DraftPolicy(DraftConfig(max_draft=32, probe=3))
    steps = [(3, 3), (32, 32), (32, 10), (3, 3), (32, 0), (3, 1), (3, 3), (0, 0)]
    assert lengths(policy, steps) == [3, 32, 32, 3, 32, 3, 3, 32, 32]  # a step without a draft changes nothing


def test_policy_grows_the_draft_with_growth() -> None:
    policy = DraftPolicy(DraftConfig(max_draft=32, probe=3, growth=2))
    steps = [(3, 3), (7, 7), (15, 15), (31, 31), (32, 32), (32, 5), (3, 3)]
    assert lengths(policy, steps) == [3, 7, 15, 31, 32, 32, 3, 7]


def test_policy_stops_after_failures_and_retries_with_a_probe() -> None:
    config = DraftConfig(max_draft=32, probe=3, patience=2, retry_after=4)
    policy = DraftPolicy(config)
    # One failure is forgiven (a probe next), a partial success resets the count, two in a row stop drafting.
    assert lengths(policy, [(3, 0), (3, 1), (3, 0), (3, 0)]) == [3, 3, 3, 3, 0]
    assert policy.stopped
    # Stopped: 4 steps without a draft, then one probe; it fails, so the wait doubles (8 steps).
    assert lengths(policy, [(0, 0)] * 4 + [(3, 0)] + [(0, 0)] * 8) == [0, 0, 0, 0, 3] + [0] * 8 + [3]
    assert policy.stopped
    # A step whose drafter had no match while a probe was allowed keeps the probe for the next step.
    assert lengths(policy, [(0, 0), (0, 0)]) == [3, 3, 3]
    # The probe accepted whole: back on with the full draft, and the wait is back to retry_after.
    assert lengths(policy, [(3, 3)]) == [3, 32]
    assert not policy.stopped
    assert lengths(policy, [(32, 0), (3, 0)] + [(0, 0)] * 4) == [32, 3, 0, 0, 0, 0, 3]
    # A probe accepted in part turns drafting back on at the probe length.
    assert lengths(policy, [(3, 2), (3, 3)]) == [3, 3, 32]


def test_policy_refuses_impossible_steps() -> None:
    policy = DraftPolicy()
    for drafted, accepted in ((3, 4), (-1, 0), (2, -1)):
        with pytest.raises(ValueError, match="accepted"):
            policy.update(drafted, accepted)
