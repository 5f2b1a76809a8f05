"""Sweeps the expert-centric path's grouped-GEMM tiles on the GPU, per token count (the path serves the batches
past warp decode's crossover, and prefill).

    python -m warpcode.bench.tune_expert_centric --shape 2048,768,128,8 --batch 16,32,64,128 \
        --write kernels/configs/NVIDIA_H200.json [--weights mxfp8] [--register-caps 168,128]

Each candidate times the whole path (align, both grouped GEMMs, activation, reduction: CUDA-graph replay over
rotated layers, `timing.time_per_call`); the fastest per bucket is merged into the config file's "expert_centric"
section, which `tuning.grouped_gemm_config` reads. Candidates that exceed shared memory are skipped. With
`--weights mxfp8` the layers' w13/w2 are MXFP8 (kernels/mx.py), the candidates' weight tiles may be twice as large
(fp8: the same bytes), and the results go under the key "H,I,E,K,mx", which `grouped_gemm_config(..., mx=True)`
reads. The candidates' kernels are compiled first by parallel processes (Triton's on-disk cache is shared), so
timing them only loads them. `--register-caps 168,128` times the fastest tiles again under each register cap
(Triton's maxnreg), kept where faster (`max_registers` in the entry).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
from dataclasses import replace

import torch
import triton

from warpcode.bench.config_file import config_entry, update_config_file
from warpcode.bench.moe import MoeShape, layer_count, make_layers, parse_tuner_args
from warpcode.bench.timing import time_per_call
from warpcode.kernels.expert_centric import moe_expert_centric
from warpcode.kernels.mx import quantize_mxfp8_torch
from warpcode.kernels.tuning import (
    GROUPED_GEMM_BUCKETS,
    GroupedGemmConfig,
    grouped_gemm_config,
    shape_key,
    token_bucket,
)

CAPPED_TILES = 4  # the fastest tiles timed again under each register cap


def candidates(shape: MoeShape, batch: int, mx: bool = False) -> list[GroupedGemmConfig]:
    """Block heights up to the average slots per expert (rounded up, at least 16), then widths, depths, warps and
    pipeline stages (54 per height); weight tiles beyond 256 x 128 exceed shared memory with several stages (MX:
    fp8 tiles, 256 x 256 and depth 512 too)."""
    slots_per_expert = batch * shape.top_k / shape.experts
    heights = [m for m in (16, 32, 64, 128) if m <= max(16, triton.next_power_of_2(int(slots_per_expert + 0.5)))]
    depths = (64, 128, 256, 512) if mx else (64, 128, 256)
    tiles = itertools.product(heights, (64, 128, 256), depths, (4, 8), (2, 3, 4))
    return [
        GroupedGemmConfig(block_m=m, block_n=n, block_k=k, num_warps=warps, num_stages=stages)
        for m, n, k, warps, stages in tiles
        if n * k <= (2 if mx else 1) * 256 * 128
    ]


def tune(
    shape: MoeShape, batch: int, mx: bool = False, register_caps: tuple[int, ...] = ()
) -> tuple[GroupedGemmConfig, float, float]:
    """(fastest config, its seconds per layer, the current default's seconds per layer). With `register_caps`, the
    CAPPED_TILES fastest tiles are timed again under each cap (maxnreg: registers bound how many programs an SM
    holds, and a cap below what a tile needs spills)."""
    device = torch.device("cuda")
    precompile(shape, batch, mx, [c for c in candidates(shape, batch, mx) if c not in _COMPILED])
    budget = int(torch.cuda.mem_get_info(device)[0] * 0.6)
    layers = make_layers(shape, batch, torch.bfloat16, device, layer_count(shape, batch, torch.bfloat16, budget))
    if mx:
        layers = mx_layers(layers)

    def seconds(config: GroupedGemmConfig) -> float:
        return time_per_call(lambda *layer: moe_expert_centric(*layer, config=config), layers)[0]

    def timed(configs: list[GroupedGemmConfig]) -> list[tuple[float, GroupedGemmConfig]]:
        found = []
        for config in configs:
            try:
                found.append((seconds(config), config))
            except triton.runtime.errors.OutOfResources:
                continue
        return found

    results = sorted(timed(candidates(shape, batch, mx)), key=lambda pair: pair[0])
    if register_caps:
        capped = [replace(config, max_registers=cap) for _, config in results[:CAPPED_TILES] for cap in register_caps]
        precompile(shape, batch, mx, [c for c in capped if c not in _COMPILED])
        results = sorted(results + timed(capped), key=lambda pair: pair[0])
    best_seconds, best = results[0]
    default = grouped_gemm_config(shape.hidden, shape.intermediate, shape.experts, shape.top_k, batch, mx)
    return best, best_seconds, seconds(default)


_COMPILED: set[GroupedGemmConfig] = set()  # candidates whose kernels this run has compiled


def precompile(shape: MoeShape, batch: int, mx: bool, configs: list[GroupedGemmConfig]) -> None:
    """Compiles the kernels of `configs` in parallel processes, one share each (compiling one candidate after
    another took most of a tuning run; the kernels specialise on the shape, not the token count)."""
    workers = min(len(configs), max(1, (os.cpu_count() or 2) - 2))
    if workers:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            pool.starmap(_compile_share, [(shape, batch, mx, configs[i::workers]) for i in range(workers)])
    _COMPILED.update(configs)


def _compile_share(shape: MoeShape, batch: int, mx: bool, configs: list[GroupedGemmConfig]) -> None:
    layer = make_layers(shape, batch, torch.bfloat16, torch.device("cuda"), 1, mx=mx)[0]
    for config in configs:
        try:
            moe_expert_centric(*layer, config=config)
        except triton.runtime.errors.OutOfResources:
            continue
    torch.cuda.synchronize()


def mx_layers(layers: list[tuple]) -> list[tuple]:
    """The layers with w13 and w2 in MXFP8, quantised one layer at a time (each bf16 layer freed once quantised)."""
    quantised = []
    while layers:
        x, topk_weights, topk_ids, w13, w2 = layers.pop(0)
        quantised.append((x, topk_weights, topk_ids, quantize_mxfp8_torch(w13), quantize_mxfp8_torch(w2)))
    return quantised


def main(argv: list[str] | None = None) -> None:
    args, shape, batches = parse_tuner_args(
        __doc__.splitlines()[0], "16,32,64,128", argv, weight_format=True, register_caps=True
    )
    mx = args.weights == "mxfp8"
    configs = {}
    for batch in batches:
        best, best_seconds, default_seconds = tune(shape, batch, mx, args.register_caps)
        configs[str(token_bucket(batch, GROUPED_GEMM_BUCKETS))] = config_entry(best)
        line = {"shape": args.shape, "weights": args.weights, "batch": batch, "config": config_entry(best)}
        print(json.dumps({**line, "us": best_seconds * 1e6, "default_us": default_seconds * 1e6}), flush=True)
    if args.write:
        key = shape_key(shape.hidden, shape.intermediate, shape.experts, shape.top_k, mx)
        update_config_file(args.write, "expert_centric", key, configs, replace=False)


if __name__ == "__main__":
    main()
