"""edit_file on real commits: a compact sample of bench/edit_corpus.py's corpus (sources and licences in
tests/fixtures/edit_corpus/edits.jsonl), each edit called exactly and with the mistakes models make."""

from __future__ import annotations

from collections import Counter

from warpcode.bench.edit_calls import grade, load_sample


def test_real_edits_are_right_exactly_and_never_wrong_tolerantly() -> None:
    edits = load_sample()
    exact: Counter[str] = Counter()
    tolerant: Counter[str] = Counter()
    failures = []
    for edit, outcome in grade(edits):
        (exact if outcome.call.variant == "exact" else tolerant)[outcome.kind] += 1
        if outcome.kind not in ("right", "refused"):
            failures.append(f"{outcome.kind}, {outcome.call.variant}: {edit.repo} {edit.commit[:10]} {edit.path}")
    assert not failures, "\n".join(failures[:10])
    assert exact["right"] == len(edits)
    assert tolerant["right"] >= 0.95 * sum(tolerant.values()) and tolerant["right"] > 100, tolerant
