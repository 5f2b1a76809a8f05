"""Personalized PageRank by power iteration over a weighted graph of a few thousand files."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from operator import itemgetter, mul

DAMPING = 0.85
TOLERANCE = 1e-4  # L1 change per iteration; the map only needs the order of the top ranks to settle
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
    for node, weight in (personalization or {}).items():
        if node in index:
            jump[index[node]] = weight
    total = sum(jump)
    jump = [weight / total for weight in jump] if total > 0 else [1.0 / size] * size
    out_weight = [0.0] * size
    for (source, _), weight in edges.items():
        out_weight[index[source]] += weight
    # Incoming edges grouped by target, so one iteration is a C-level dot product per node.
    sources: list[list[int]] = [[] for _ in range(size)]
    shares: list[list[float]] = [[] for _ in range(size)]
    for (source, target), weight in edges.items():
        s = index[source]
        sources[index[target]].append(s)
        shares[index[target]].append(weight / out_weight[s])
    dangling_nodes = [i for i in range(size) if out_weight[i] == 0.0]
    # itemgetter(*indexes)(rank) gathers the source ranks in C. With a single index it would return a bare
    # float, so every group gets one padding index whose share is 0.
    gathers = [itemgetter(*group, group[0]) if group else None for group in sources]
    shares = [[*group, 0.0] for group in shares]
    rank = list(jump)
    for _ in range(MAX_ITERATIONS):
        base = (1.0 - DAMPING) + DAMPING * sum(rank[i] for i in dangling_nodes)
        updated = [
            DAMPING * sum(map(mul, gather(rank), shares[i])) + base * jump[i] if gather else base * jump[i]
            for i, gather in enumerate(gathers)
        ]
        change = sum(abs(new - old) for new, old in zip(updated, rank, strict=True))
        rank = updated
        if change < TOLERANCE:
            break
    return {node: rank[i] for node, i in index.items()}
