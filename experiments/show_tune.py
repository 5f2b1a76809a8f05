"""Prints `python -m warpcode.bench.tune_warp_decode` lines compactly (used by experiments/gpu_session.sh)."""

import json
import sys

for line in sys.stdin:
    if not line.startswith("{"):
        print(line, end="", flush=True)
        continue
    row = json.loads(line)
    if "crossover" in row:
        print(f"{row['shape']}: warp decode faster up to T={row['crossover']}", flush=True)
        continue
    print(
        f"{row['shape']} T={row['batch']:<4} gate_up {row['gate_up_us']:7.1f} down {row['down_us']:7.1f} "
        f"total {row['total_us']:7.1f} us  expert-centric {row['expert_centric_us']:7.1f} us  {row['config']}",
        flush=True,
    )
