"""Prefill attention of one layer at the qwen3-30b-a3b shape: the paged Triton kernel (what the prefill graphs run)
against the eager prefill's gather + PyTorch SDPA, per (chunk tokens, cached prefix), CUDA events, median of 20.

python3 experiments/sweep_prefill_attention.py [--cases 300:16000,1024:31000] [--configs]

--configs also times the kernel's configurations (rows per program, BLOCK_N, warps, stages, key splits, register
cap) per case.
"""

from __future__ import annotations

import argparse
import itertools
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from warpcode.kernels.prefill_attention import paged_prefill_attention

HEADS, KV_HEADS, DIM, BLOCK = 32, 4, 128, 256


def median_ms(function, repeats: int = 20) -> float:
    function()
    times = []
    for _ in range(repeats):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        function()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end))
    return statistics.median(times)


CONFIGS = list(itertools.product((64, 128), (64, 128), (4, 8), (2, 3, 4), (1, 2, 3, 6, 8), (None, 128)))


def time_case(tokens: int, start: int, sweep: bool) -> str:
    end = start + tokens
    used = -(-end // BLOCK)
    k_pool = torch.randn(used + 1, KV_HEADS, BLOCK, DIM, device="cuda", dtype=torch.bfloat16)
    v_pool = torch.randn_like(k_pool)
    table = torch.randperm(used + 1, device="cuda")[:used].to(torch.int32)
    q = torch.randn(tokens, HEADS, DIM, device="cuda", dtype=torch.bfloat16)
    start_tensor = torch.tensor([start], dtype=torch.int32, device="cuda")

    def triton_kernel():
        paged_prefill_attention(q, k_pool, v_pool, table, start_tensor)

    def gather_sdpa():
        keys = k_pool[table.long()].transpose(0, 1).reshape(1, KV_HEADS, used * BLOCK, DIM)[:, :, :end]
        values = v_pool[table.long()].transpose(0, 1).reshape(1, KV_HEADS, used * BLOCK, DIM)[:, :, :end]
        mask = None if start == 0 else causal_lower_right(tokens, end)
        F.scaled_dot_product_attention(q.transpose(0, 1)[None], keys, values, attn_mask=mask,
                                       is_causal=start == 0, enable_gqa=True)  # fmt: skip

    flops = 4 * tokens * (start + tokens / 2) * DIM * HEADS
    ours, eager = median_ms(triton_kernel), median_ms(gather_sdpa)
    if sweep:
        timed = []
        for config in CONFIGS:
            try:
                run = lambda c=config: paged_prefill_attention(q, k_pool, v_pool, table, start_tensor, config=c)
                timed.append((median_ms(run), config))
            except Exception as error:  # a configuration that does not fit the SM (shared memory, registers)
                print(f"  {config}: {type(error).__name__}", flush=True)
        for ms, config in sorted(timed)[:4]:
            print(f"  T={tokens} prefix={start} config {config}: {ms:.3f} ms ({flops / ms / 1e9:.1f} TFLOP/s)")
    return (f"T={tokens:5d} prefix={start:6d}: triton {ours:7.3f} ms ({flops / ours / 1e9:6.1f} TFLOP/s), "
            f"gather+sdpa {eager:7.3f} ms ({flops / eager / 1e9:6.1f} TFLOP/s), ratio {eager / ours:.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="64:2000,300:16000,384:16000,1024:7000,1024:31000")
    parser.add_argument("--configs", action="store_true", help="also time every tile configuration")
    args = parser.parse_args()
    for case in args.cases.split(","):
        tokens, start = (int(part) for part in case.split(":"))
        print(time_case(tokens, start, args.configs), flush=True)


if __name__ == "__main__":
    main()
