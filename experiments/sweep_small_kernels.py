"""Launch parameters of the decode step's small kernels at the qwen3-30b-a3b shape, batch 1: route (warps),
add+RMSNorm (warps), decode attention (keys per tile, warps, stages of the streaming splits) at 512 and 8,192
tokens. Graph-replayed over 48 layers' inputs. Each variant is passed to the launcher explicitly; the winners go
into the device's config file (kernels/configs/, experiments/config_variant.py to try them in the model).

    python experiments/sweep_small_kernels.py
"""

from __future__ import annotations

from dataclasses import replace

import torch

from warpcode.bench.timing import time_per_call
from warpcode.kernels.attention_splits import attention_settings
from warpcode.kernels.decode_attention import decode_attention_triton
from warpcode.kernels.norm import add_rmsnorm_triton
from warpcode.kernels.route import route_settings, route_triton

LAYERS = 48


def us(call, argument_sets) -> str:
    return f"{time_per_call(call, argument_sets)[0] * 1e6:.2f}"


def main() -> None:
    logits = [(torch.randn(1, 128, device="cuda", dtype=torch.bfloat16),) for _ in range(LAYERS)]
    for warps in (1, 2, 4):
        settings = replace(route_settings(), num_warps=warps)
        print(f"route warps={warps}: {us(lambda x, s=settings: route_triton(x, 8, True, settings=s), logits)} us")
    rows = [tuple(torch.randn(1, 2048, device="cuda", dtype=torch.bfloat16) for _ in range(2)) for _ in range(LAYERS)]
    weight = torch.ones(2048, device="cuda", dtype=torch.bfloat16)
    for warps in (1, 2, 4, 8, 16):
        call = lambda x, r, w=warps: add_rmsnorm_triton(x, weight, 1e-6, r, num_warps=w)
        print(f"add_rmsnorm warps={warps}: {us(call, rows)} us", flush=True)
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
            settings = replace(
                attention_settings(), one_tile_blocks=(), block_n=block_n, num_warps=warps, num_stages=stages
            )

            def attend(k, v, q=q, lens=lens, settings=settings):
                return decode_attention_triton(q, k, v, lens, 128**-0.5, settings=settings)

            try:
                time = us(attend, caches)
            except Exception as error:  # a variant that does not compile is reported, not fatal
                time = f"failed ({type(error).__name__})"
            print(f"attention len={length} block_n={block_n} warps={warps} stages={stages}: {time} us", flush=True)


if __name__ == "__main__":
    main()
