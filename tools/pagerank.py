"""Personalized PageRank by power iteration over a small weighted graph (a few thousand files)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

DAMPING = 0.85
TOLERANCE = 1e-6
MAX_ITERATIONS = 100


def pagerank(
    edges: Mapping[tuple[Hashable, Hashable], float],
    nodes: list[Hashable],
    personalization: Mapping[Hashable, float] | None = None,
) -> dict[Hashable, float]:
    """Rank of each node; `edges` maps (source, target) to a positive weight.

    With probability 1 - DAMPING (and always from a node without out-edges) the walk jumps to a node drawn
    from `personalization` (uniform when empty), which is what biases the ranking toward focus files.
    """
    if not nodes:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    size = len(nodes)
    jump = [0.0] * size
    if personalization:
        total = sum(personalization.values())
        for node, weight in personalization.items():
            if node in index:
                jump[index[node]] = weight / total
    if not any(jump):
        jump = [1.0 / size] * size
    out_weight = [0.0] * size
    links: list[tuple[int, int, float]] = []
    for (source, target), weight in edges.items():
        links.append((index[source], index[target], weight))
        out_weight[index[source]] += weight
    links = [(s, t, w / out_weight[s]) for s, t, w in links]
    rank = list(jump)
    for _ in range(MAX_ITERATIONS):
        dangling = sum(rank[i] for i in range(size) if out_weight[i] == 0.0)
        following = [0.0] * size
        for source, target, share in links:
            following[target] += rank[source] * share
        base = (1.0 - DAMPING) + DAMPING * dangling
        updated = [DAMPING * following[i] + base * jump[i] for i in range(size)]
        change = sum(abs(updated[i] - rank[i]) for i in range(size))
        rank = updated
        if change < TOLERANCE:
            break
    return {node: rank[i] for node, i in index.items()}
