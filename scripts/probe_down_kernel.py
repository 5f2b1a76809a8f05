"""Diagnostic: the warp-decode down kernel alone, fp32 vs bf16 intermediate, over tile shapes (device only)."""

import itertools

import torch
import triton

from warpcode.kernels.bench_moe import MoeShape, make_layers
from warpcode.kernels.timing import time_per_call
from warpcode.kernels.tuning import WarpDecodeConfig
from warpcode.kernels.warp_decode import launch_down

shape = MoeShape(2048, 768, 128, 8)
for tokens in (1, 8):
    layers = make_layers(shape, tokens, torch.bfloat16, torch.device("cuda"), 4)
    for hidden_dtype in (torch.float32, torch.bfloat16):
        args = [
            (torch.randn(tokens * 8, 768, device="cuda").to(hidden_dtype), w, ids, w2, torch.empty_like(x))
            for x, w, ids, _, w2 in layers
        ]
        results = []
        for rows, cols, warps in itertools.product((1, 2, 4, 8, 16), (128, 256, 512), (1, 2, 4, 8)):
            if not 8 <= 8 * rows * cols / (warps * 32) <= 256:
                continue
            config = WarpDecodeConfig(down_rows=rows, down_cols=cols, down_warps=warps)
            try:
                seconds, _ = time_per_call(lambda *a, c=config: launch_down(*a, c), args)
            except triton.runtime.errors.OutOfResources:
                continue
            results.append((seconds * 1e6, rows, cols, warps))
        results.sort()
        unique = sum(torch.unique(ids).numel() for _, _, ids, _, _ in layers) / len(layers) * 2048 * 768 * 2
        for us, rows, cols, warps in results[:4]:
            print(
                f"T={tokens} hidden={hidden_dtype} rows={rows} cols={cols} warps={warps}: {us:.2f} us "
                f"{unique / us / 1e3:.0f} GB/s",
                flush=True,
            )
