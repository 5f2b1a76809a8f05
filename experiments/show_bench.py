"""Prints `warpcode bench moe --json` lines as a compact table (used by experiments/gpu_session.sh)."""

import json
import sys

for line in sys.stdin:
    row = json.loads(line)
    speedup = row.get("speedup_vs_transformers") or 0.0
    print(
        f"{row['path']:<24} {row.get('weights', 'bf16'):<6} T={row['batch']:<4} {row['microseconds']:8.1f} us "
        f"{row['gigabytes_per_second']:6.0f} GB/s "
        f"{row['percent_of_copy']:5.1f}% err {row['relative_error']:.2e} x{speedup:5.1f} {row['timing']}",
        flush=True,
    )
