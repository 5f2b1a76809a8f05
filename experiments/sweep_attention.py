"""Decode attention time per layer against the number of KV splits (qwen3-30b-a3b heads), graph-replayed over
48 layers' caches so the cache is read from HBM; with --launch-params, against the split kernel's keys per tile,
warps and pipeline stages instead (default splits and merge, batch 1).

    python experiments/sweep_attention.py [--launch-params]
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import replace

import torch
import triton

from warpcode.bench.timing import time_per_call
from warpcode.kernels.attention_splits import attention_settings
from warpcode.kernels.decode_attention import decode_attention_triton

HQ, HKV, D, LAYERS = 32, 4, 128, 48


def caches_for(batch: int, capacity: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [
        (torch.randn(batch, HKV, capacity, D, device="cuda", dtype=torch.bfloat16),
         torch.randn(batch, HKV, capacity, D, device="cuda", dtype=torch.bfloat16))
        for _ in range(LAYERS)
    ]  # fmt: skip


def sweep_launch_params() -> None:
    """Batch 1 at 512 and 8,192 keys: every (keys per tile, warps, stages) of the streaming splits (one-tile splits
    off); shared-memory or register overflows are reported as such."""
    for length, capacity in ((513, 768), (8193, 8448)):
        caches = caches_for(1, capacity)
        q = torch.randn(1, HQ, D, device="cuda", dtype=torch.bfloat16)
        lens = torch.full((1,), length, device="cuda", dtype=torch.int32)
        kv_bytes = 2 * HKV * length * D * 2
        for block_n, warps, stages in itertools.product((32, 64, 128), (1, 2, 4, 8), (1, 2, 3, 4)):
            settings = replace(
                attention_settings(), one_tile_blocks=(), block_n=block_n, num_warps=warps, num_stages=stages
            )
            label = f"len={length} block_n={block_n} warps={warps} stages={stages}"
            try:
                seconds, _ = time_per_call(
                    lambda k, v, q=q, lens=lens, s=settings: decode_attention_triton(
                        q, k, v, lens, D**-0.5, settings=s
                    ),
                    caches,
                )
            except triton.runtime.errors.OutOfResources as error:
                print(f"{label}: {error}", flush=True)
                continue
            print(f"{label}: {seconds * 1e6:.2f} us ({kv_bytes / seconds / 1e9:.0f} GB/s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launch-params", action="store_true")
    if parser.parse_args().launch_params:
        sweep_launch_params()
        return
    for batch, length, capacity in ((1, 513, 768), (1, 8193, 8448), (8, 513, 768), (8, 8193, 8448)):
        caches = caches_for(batch, capacity)
        q = torch.randn(batch, HQ, D, device="cuda", dtype=torch.bfloat16)
        lens = torch.full((batch,), length, device="cuda", dtype=torch.int32)
        kv_bytes = 2 * batch * HKV * length * D * 2
        results = []
        for separate_merge in (True, False):
            settings = replace(attention_settings(), merge_kernel_min_splits=2 if separate_merge else 10**9)
            results.append("merge kernel:" if separate_merge else "| merge in the split kernel:")
            for splits in (None, 8, 16, 32, 64, 128):
                if splits is not None and splits > -(-capacity // 64):
                    continue
                seconds, _ = time_per_call(
                    lambda k, v, s=splits, q=q, lens=lens, settings=settings: decode_attention_triton(
                        q, k, v, lens, D**-0.5, num_splits=s, settings=settings
                    ),
                    caches,
                )
                results.append(f"{splits or 'default'}: {seconds * 1e6:.2f} us ({kv_bytes / seconds / 1e9:.0f} GB/s)")
        print(f"B={batch} len={length} cap={capacity}: " + "; ".join(results), flush=True)


if __name__ == "__main__":
    main()
