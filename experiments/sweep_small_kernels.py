"""Launch parameters of the decode step's small kernels at the qwen3-30b-a3b shape, batch 1: route (warps),
add+RMSNorm (warps), decode attention (keys per tile, warps, stages) at 512 and 8,192 tokens. Graph-replayed over
48 layers' inputs. Module constants are patched per variant; the winners go back into the modules by hand.

    python experiments/sweep_small_kernels.py
"""

from __future__ import annotations

import importlib

import torch

from warpcode.bench.timing import time_per_call
from warpcode.kernels import decode_attention as attention
from warpcode.kernels import norm

route = importlib.import_module("warpcode.kernels.route")  # the package exports a function of the same name

LAYERS = 48


def us(call, argument_sets) -> str:
    return f"{time_per_call(call, argument_sets)[0] * 1e6:.2f}"


def main() -> None:
    logits = [(torch.randn(1, 128, device="cuda", dtype=torch.bfloat16),) for _ in range(LAYERS)]
    for warps in (1, 2, 4):
        route._NUM_WARPS = warps
        print(f"route warps={warps}: {us(lambda x: route.route_triton(x, 8, True), logits)} us", flush=True)
    rows = [tuple(torch.randn(1, 2048, device="cuda", dtype=torch.bfloat16) for _ in range(2)) for _ in range(LAYERS)]
    weight = torch.ones(2048, device="cuda", dtype=torch.bfloat16)
    for warps in (1, 2, 4, 8, 16):
        norm._num_warps = lambda block_h, w=warps: w
        print(f"add_rmsnorm warps={warps}: {us(lambda x, r: norm.add_rmsnorm(x, weight, 1e-6, r), rows)} us")
    for length, capacity in ((513, 768), (8193, 8448)):
        caches = [
            (torch.randn(1, 4, capacity, 128, device="cuda", dtype=torch.bfloat16),
             torch.randn(1, 4, capacity, 128, device="cuda", dtype=torch.bfloat16))
            for _ in range(LAYERS)
        ]  # fmt: skip
        q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
        lens = torch.full((1,), length, device="cuda", dtype=torch.int32)
        for block_n, warps, stages in ((64, 4, 2), (32, 4, 2), (64, 2, 2), (64, 4, 3), (128, 4, 2), (128, 8, 3),
                                       (64, 8, 2), (32, 2, 2), (128, 4, 3)):  # fmt: skip
            attention._BLOCK_N, attention._NUM_WARPS, attention._NUM_STAGES = block_n, warps, stages
            try:
                time = us(lambda k, v, q=q, lens=lens: attention.decode_attention(q, k, v, lens, 128**-0.5), caches)
            except Exception as error:  # a variant that does not compile is reported, not fatal
                time = f"failed ({type(error).__name__})"
            print(f"attention len={length} block_n={block_n} warps={warps} stages={stages}: {time} us", flush=True)


if __name__ == "__main__":
    main()
