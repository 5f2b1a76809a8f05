"""Decode attention time per layer against the number of KV splits (qwen3-30b-a3b heads), graph-replayed over
48 layers' caches so the cache is read from HBM.

    python scripts/sweep_attention.py
"""

from __future__ import annotations

import torch

from warpcode.kernels import decode_attention as attention_module
from warpcode.kernels.decode_attention import MERGE_KERNEL_MIN_SPLITS, decode_attention_triton
from warpcode.kernels.timing import time_per_call

HQ, HKV, D, LAYERS = 32, 4, 128, 48


def main() -> None:
    for batch, length, capacity in ((1, 513, 768), (1, 8193, 8448), (8, 513, 768), (8, 8193, 8448)):
        caches = [
            (torch.randn(batch, HKV, capacity, D, device="cuda", dtype=torch.bfloat16),
             torch.randn(batch, HKV, capacity, D, device="cuda", dtype=torch.bfloat16))
            for _ in range(LAYERS)
        ]  # fmt: skip
        q = torch.randn(batch, HQ, D, device="cuda", dtype=torch.bfloat16)
        lens = torch.full((batch,), length, device="cuda", dtype=torch.int32)
        kv_bytes = 2 * batch * HKV * length * D * 2
        results = []
        for separate_merge in (True, False):
            attention_module.MERGE_KERNEL_MIN_SPLITS = 2 if separate_merge else 10**9
            results.append("merge kernel:" if separate_merge else "| merge in the split kernel:")
            for splits in (None, 8, 16, 32, 64, 128):
                if splits is not None and splits > -(-capacity // 64):
                    continue
                seconds, _ = time_per_call(
                    lambda k, v, s=splits, q=q, lens=lens: decode_attention_triton(
                        q, k, v, lens, D**-0.5, num_splits=s
                    ),
                    caches,
                )
                results.append(f"{splits or 'default'}: {seconds * 1e6:.2f} us ({kv_bytes / seconds / 1e9:.0f} GB/s)")
        attention_module.MERGE_KERNEL_MIN_SPLITS = MERGE_KERNEL_MIN_SPLITS
        print(f"B={batch} len={length} cap={capacity}: " + "; ".join(results), flush=True)


if __name__ == "__main__":
    main()
