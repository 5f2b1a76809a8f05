"""The batch-1 MX kernels of a qwen3-30b-a3b decoder layer against their bf16 counterparts, on the GPU.

    python3 experiments/sweep_mx_kernels.py [--tokens 1,8] [--json] [--capped-only] [--register-caps 168,128]
    ncu ... python3 experiments/sweep_mx_kernels.py --once     # each kernel launched once per weight format, untimed

Times (CUDA-graph replay over rotated weight copies, so nothing is served from L2) warp decode's gate_up and down
kernels (down on CUDA cores and, for MX weights, on tensor cores: kernels/mx_down.py) and the whole MoE at each
token count, the q/k/v GEMV with its RMSNorm prologue at one row and the fused o_proj + router kernel, each over a
few launch configurations around the tuned one, and prints the rate on the unique weight bytes against the copy
bandwidth measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch

from warpcode.bench.moe import MoeShape, make_layers, register_cap_list
from warpcode.bench.timing import measure_copy_bandwidth, time_per_call
from warpcode.bench.tune_warp_decode import kernel_arguments, time_config
from warpcode.kernels.gemv import GemvConfig, default_gemv_config, gemv
from warpcode.kernels.mx import quantize_mxfp8
from warpcode.kernels.o_proj_router import o_proj_router, router_fold
from warpcode.kernels.tuning import WarpDecodeConfig, warp_decode_config
from warpcode.kernels.warp_decode import launch_down, launch_gate_up, moe_warp_decode

SHAPE = MoeShape(hidden=2048, intermediate=768, experts=128, top_k=8)
QKV_ROWS, O_COLUMNS = 5120, 4096
COPIES = 8  # rotated weight copies per measurement

# (rows, columns, warps, stages): whole rows at once, and narrower tiles pipelined over several stages
GATE_UP_MX = [
    (4, 1024, 2, 1), (4, 512, 2, 2), (4, 512, 2, 3), (4, 256, 2, 3), (4, 256, 2, 4), (2, 512, 1, 3), (2, 512, 2, 3),
    (8, 512, 4, 2), (8, 256, 4, 3), (8, 512, 4, 3), (4, 512, 4, 3), (2, 1024, 2, 2), (4, 1024, 4, 2), (1, 1024, 1, 2),
    (2, 256, 1, 4), (8, 1024, 4, 1),
]  # fmt: skip
DOWN_MX = [
    (4, 256, 8, 1), (4, 256, 8, 2), (4, 128, 4, 3), (4, 128, 8, 3), (2, 128, 4, 3), (8, 128, 8, 3), (4, 64, 4, 4),
    (8, 64, 4, 4), (2, 256, 4, 2), (8, 256, 8, 2), (4, 256, 4, 3), (8, 256, 8, 1),
]  # fmt: skip
# kernel 2 on tensor cores (kernels/mx_down.py): (rows, columns, warps, stages) of one slot's tile
DOWN_MX_ON_MMA = [
    (64, 128, 2, 3), (64, 128, 2, 4), (32, 128, 1, 3), (32, 128, 1, 4), (128, 128, 2, 3), (64, 64, 2, 3),
    (32, 64, 1, 4), (16, 128, 1, 3), (32, 256, 1, 2), (64, 128, 1, 3),
]  # fmt: skip
# ... and those timed under each of --register-caps too: the tuned ones, and four-warp tiles whose registers (not
# shared memory) bound the programs an SM holds (96-168 a thread, sm_90, Triton 3.6)
CAPPED_MMA_TILES = [
    (64, 128, 2, 3), (64, 128, 1, 3), (32, 128, 1, 3), (128, 64, 4, 3), (128, 128, 4, 3), (64, 256, 4, 2),
    (64, 128, 4, 3),
]  # fmt: skip
GEMV_MX = [
    (8, 2048, 4, 1), (8, 1024, 4, 2), (8, 512, 4, 3), (16, 512, 8, 3), (4, 1024, 2, 2), (8, 1024, 8, 2),
    (16, 1024, 8, 2), (4, 512, 2, 3), (16, 256, 4, 4), (4, 2048, 4, 1),
]  # fmt: skip


def rate(kernel: str, weights: str, tokens: int, config, seconds: float, nbytes: float, copy_bw: float) -> dict:
    """One output row: the time and the rate on the kernel's unique weight bytes."""
    return {"kernel": kernel, "weights": weights, "tokens": tokens, "config": config, "us": seconds * 1e6,
            "tb_s": nbytes / seconds / 1e12, "of_copy": nbytes / seconds / copy_bw}  # fmt: skip


def moe_rows(
    tokens: int, mx: bool, copy_bw: float, emit, register_caps: tuple[int, ...] = (), capped_only: bool = False
) -> None:
    """The rows of warp decode at `tokens`: the whole MoE, then each kernel's tiles; under each of
    `register_caps` the CAPPED_MMA_TILES of kernel 2 on tensor cores again (capped_only: only those, uncapped and
    capped, and the tuned configs)."""
    layers = make_layers(SHAPE, tokens, torch.bfloat16, torch.device("cuda"), COPIES, mx)
    tuned = warp_decode_config(SHAPE.hidden, SHAPE.intermediate, SHAPE.experts, SHAPE.top_k, tokens, mx)
    gate_up, down = kernel_arguments(layers, SHAPE)
    touched = sum(torch.unique(layer[2]).numel() for layer in layers) / len(layers) / SHAPE.experts
    w13_bytes, w2_bytes = layers[0][3].nbytes * touched, layers[0][4].nbytes * touched
    weights = "mxfp8" if mx else "bf16"

    def report(kernel: str, config, seconds: float | None, nbytes: float) -> None:
        if seconds is not None:  # None: the tile does not fit the SM
            emit(rate(kernel, weights, tokens, config, seconds, nbytes, copy_bw))

    seconds, _ = time_per_call(lambda *a: moe_warp_decode(*a, config=tuned), [layer[:5] for layer in layers])
    report("moe", "tuned", seconds, w13_bytes + w2_bytes)
    gate_up_configs = [tuned] + [
        WarpDecodeConfig(gate_up_rows=r, gate_up_cols=c, gate_up_warps=w, gate_up_stages=st)
        for r, c, w, st in (GATE_UP_MX if mx and not capped_only else [])
    ]  # fmt: skip
    cuda_core_tiles = DOWN_MX if mx and not capped_only else []
    mma_tiles = (CAPPED_MMA_TILES if capped_only else DOWN_MX_ON_MMA) if mx else []
    down_configs = [tuned] + [
        WarpDecodeConfig(down_rows=r, down_cols=c, down_warps=w, down_stages=st, down_on_mma=on_mma)
        for on_mma, tiles in ((False, cuda_core_tiles), (True, mma_tiles))
        for r, c, w, st in tiles
    ]
    down_configs += [  # kernel 2 on tensor cores under each register cap (maxnreg)
        WarpDecodeConfig(down_rows=r, down_cols=c, down_warps=w, down_stages=st, down_on_mma=True,
                         down_max_registers=cap)
        for r, c, w, st in (CAPPED_MMA_TILES if mx else [])
        for cap in register_caps
    ]  # fmt: skip
    for config in gate_up_configs:
        seconds = time_config(launch_gate_up, config, gate_up)
        tile = [config.gate_up_rows, config.gate_up_cols, config.gate_up_warps, config.gate_up_stages]
        report("gate_up", tile, seconds, w13_bytes)
    for config in down_configs:
        seconds = time_config(launch_down, config, down)
        tile = [config.down_rows, config.down_cols, config.down_warps, config.down_stages]
        tile += [f"maxnreg {config.down_max_registers}"] if config.down_max_registers else []
        report("down on mma" if config.down_on_mma else "down", tile, seconds, w2_bytes)


def projection_rows(mx: bool, copy_bw: float, emit) -> None:
    generator = torch.Generator(device="cuda").manual_seed(0)
    weights = "mxfp8" if mx else "bf16"

    def weight(rows: int, columns: int):
        w = torch.randn(rows, columns, device="cuda", dtype=torch.bfloat16, generator=generator) / math.sqrt(columns)
        return quantize_mxfp8(w) if mx else w

    x = torch.randn(1, SHAPE.hidden, device="cuda", dtype=torch.bfloat16, generator=generator)
    gamma = torch.rand(SHAPE.hidden, device="cuda", dtype=torch.bfloat16, generator=generator) + 0.5
    out = torch.empty(1, QKV_ROWS, device="cuda", dtype=torch.bfloat16)
    qkv = [(weight(QKV_ROWS, SHAPE.hidden),) for _ in range(COPIES)]
    configs = [default_gemv_config(QKV_ROWS, SHAPE.hidden, 1, mx=mx)]
    configs += [GemvConfig(block_n=n, block_k=k, num_warps=w, num_stages=st) for n, k, w, st in (GEMV_MX if mx else [])]
    for config in configs:
        seconds = time_config(lambda w, c: gemv(x, w, config=c, out=out, norm_weight=gamma, eps=1e-6), config, qkv)
        if seconds is not None:
            shape = [config.block_n, config.block_k, config.num_warps, config.num_stages]
            emit(rate("qkv_gemv_norm", weights, 1, shape, seconds, qkv[0][0].nbytes, copy_bw))

    attn = torch.randn(1, O_COLUMNS, device="cuda", dtype=torch.bfloat16, generator=generator)
    residual = torch.randn(1, SHAPE.hidden, device="cuda", dtype=torch.bfloat16, generator=generator)
    router = torch.randn(SHAPE.experts, SHAPE.hidden, device="cuda", dtype=torch.bfloat16, generator=generator)
    layers = []
    for _ in range(COPIES):
        wo = weight(SHAPE.hidden, O_COLUMNS)
        folded_attn, folded_h = router_fold(router, gamma, wo)
        layers.append((wo, folded_attn, folded_h))
    h_out = torch.empty_like(residual)
    seconds, _ = time_per_call(lambda wo, fa, fh: o_proj_router(attn, wo, residual, (fa, fh), out=h_out), layers)
    emit(rate("o_proj_router", weights, 1, "default", seconds, layers[0][0].nbytes, copy_bw))


def once() -> None:
    """Each kernel at one token, bf16 then MX, one launch each (compiled in an earlier launch on other buffers)."""
    for mx in (False, True):
        layers = make_layers(SHAPE, 1, torch.bfloat16, torch.device("cuda"), 1, mx)
        x, weights, ids, w13, w2 = layers[0]
        for _ in range(2):
            moe_warp_decode(x, weights, ids, w13, w2)
        generator = torch.Generator(device="cuda").manual_seed(0)
        w = torch.randn(QKV_ROWS, SHAPE.hidden, device="cuda", dtype=torch.bfloat16, generator=generator) * 0.02
        w = quantize_mxfp8(w) if mx else w
        gamma = torch.ones(SHAPE.hidden, device="cuda", dtype=torch.bfloat16)
        for _ in range(2):
            gemv(x, w, norm_weight=gamma, eps=1e-6)
    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1,8", help="token counts of the MoE rows")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--once", action="store_true", help="launch each kernel once, untimed (for a profiler)")
    parser.add_argument(
        "--capped-only", action="store_true", help="MX, the tuned configs and the capped tiles alone (see moe_rows)"
    )
    parser.add_argument(
        "--register-caps", type=register_cap_list, default=(), help="also time the tiles of moe_rows capped"
    )
    args = parser.parse_args(argv)
    if args.once:
        once()
        return
    copy_bw = measure_copy_bandwidth(torch.device("cuda"))

    def emit(row: dict) -> None:
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            label = f"{row['kernel']:>14} {row['weights']:>5} T={row['tokens']:<2} {row['config']!s:>18}"
            rate = f"{row['us']:8.2f} us {row['tb_s']:5.2f} TB/s {100 * row['of_copy']:5.1f} % of copy"
            print(label, rate, flush=True)

    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", file=sys.stderr)
    for mx in (True,) if args.capped_only else (False, True):
        for tokens in (int(t) for t in args.tokens.split(",")):
            moe_rows(tokens, mx, copy_bw, emit, args.register_caps, args.capped_only)
        if not args.capped_only:
            projection_rows(mx, copy_bw, emit)


if __name__ == "__main__":
    main()
