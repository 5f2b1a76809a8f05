"""Prints `bench decode --json` lines prefixed "VARIANT round N " (gpu_session.sh mx-configs, ab) as one row per
variant and (batch, context): tok/s of each round and the mean's ratio to the first variant's."""

import collections
import json
import sys

rates = collections.defaultdict(list)  # (variant, batch, context) -> tok/s by round
variants = []
for line in sys.stdin:
    variant, _, _, row = line.split(" ", 3)
    if variant not in variants:
        variants.append(variant)
    run = json.loads(row)
    rates[variant, run["batch"], run["context"]].append(run["tokens_per_second"])
cases = sorted({(batch, context) for _, batch, context in rates})
for batch, context in cases:
    first = rates.get((variants[0], batch, context))
    for variant in variants:
        measured = rates.get((variant, batch, context))
        if not measured:
            continue
        mean = sum(measured) / len(measured)
        ratio = f"{mean / (sum(first) / len(first)):.4f}" if first else "-"
        rounds = " / ".join(f"{rate:,.1f}" for rate in measured)
        print(f"batch {batch:<3} context {context:<6} {variant:<28} {rounds:<28} x{ratio}", flush=True)
