"""Verifying a draft: which of a request's drafted tokens it keeps, and the token after them.

A verify step runs the request's last token and its k drafted tokens d_1..d_k through the model as one extension of
its cached history, which gives logits at k + 1 positions: position j's logits choose the token after the request's
tokens and d_1..d_j. Walking the positions in order, the token at each is chosen exactly as plain decoding would
choose it there (`choose`: the request's logits processors, grammar, temperature and filters, and its seeded
randomness at that step) and committed (`commit`, which applies the stop rules); while the chosen token is the
drafted one, the next position's logits are the ones plain decoding would have computed, so the walk goes on; at the
first token that differs from the draft (or after the last position) it stops. Each step thus commits the accepted
drafted tokens plus one more, and never a token plain decoding would not have produced.

Greedy, that is the longest prefix of the draft equal to the argmax, then the argmax at the first mismatch (the
bonus token). Sampling, it is rejection sampling against a draft that puts all its mass on d (a point mass q = 1[d]):
the usual rule accepts d with probability min(1, p(d) / q(d)) = p(d) and, on rejection, samples from
max(0, p - q) renormalised, which is p with d's mass removed. Drawing x ~ p and accepting iff x = d is that rule:
P(x = d) = p(d), and given x != d, x is distributed as p restricted to the other tokens, renormalised. Drawing x
with the request's own seeded randomness for that step (sampling.py: a hash of seed, step and token) also makes a
seeded request's output the same token for token with and without speculation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    committed: int  # tokens committed: the accepted drafted ones and the one chosen after them (fewer: it ended)
    accepted: int  # drafted tokens chosen as they were drafted


def verify_draft(draft: Sequence[int], choose: Callable[[int], int], commit: Callable[[int], bool]) -> Verdict:
    """Walks positions 0..len(draft): `choose(j)` is the token at position j (chosen as plain decoding would, given
    the tokens committed before it), `commit(token)` records it and says whether the request goes on (False: a stop
    token or string, or max_tokens, ended it). Stops after the first token that is not the drafted one, after the
    last position, or when the request ended."""
    for position, drafted in enumerate(draft):
        token = choose(position)
        going_on = commit(token)
        if token != drafted:
            return Verdict(position + 1, position)
        if not going_on:
            return Verdict(position + 1, position + 1)
    commit(choose(len(draft)))  # the whole draft accepted: the last position's token comes free
    return Verdict(len(draft) + 1, len(draft))
