"""Sweeps the warp-decode launch parameters of each kernel on the GPU, per token count, and finds the crossover.

    python -m warpcode.bench.tune_warp_decode --shape 2048,768,128,8 --write kernels/configs/NVIDIA_H200.json
    python -m warpcode.bench.tune_warp_decode --weights mxfp8 --shape 2048,768,128,8 --write ...

Each kernel is timed alone (CUDA-graph replay over rotated layers); the winners are timed together against the
expert-centric path (on the same weights), and the largest token count where warp decode is faster becomes the
dispatcher's crossover. MXFP8 weights (`--weights mxfp8`, written under "H,I,E,K,mx") sweep tiles of twice the
columns (16 fp8 weights per 16-byte load). `--register-caps 128,112` times kernel 2's fastest configs again
under each register cap (Triton's maxnreg), kept where faster (`down_max_registers`). Options that act only
beside the model's other kernels (`down_first_tile_early`) are left unset: decide them in the model
(experiments/config_variant.py, `gpu_session.py mx-configs`; BENCHMARKS.md).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, replace

import torch
import triton

from warpcode.bench.config_file import config_entry, update_config_file
from warpcode.bench.moe import MoeShape, layer_count, make_layers, parse_tuner_args
from warpcode.bench.timing import time_per_call
from warpcode.kernels.expert_centric import moe_expert_centric
from warpcode.kernels.tuning import WarpDecodeConfig, shape_key, token_bucket
from warpcode.kernels.warp_decode import intermediate_dtype, launch_down, launch_gate_up, moe_warp_decode

MAX_ELEMENTS_PER_THREAD = 256  # larger tiles spill registers


def min_elements_per_thread(mx: bool) -> int:
    """One 16-byte load per thread and tile at least: 8 bf16 or 16 fp8 weights."""
    return 16 if mx else 8


def gate_up_candidates(shape: MoeShape, mx: bool = False) -> list[WarpDecodeConfig]:
    found = []
    widths = (256, 512, 1024, 2048, 4096) if mx else (256, 512, 1024, 2048)
    for rows, cols, warps in itertools.product((1, 2, 4, 8, 16, 32), widths, (1, 2, 4, 8)):
        per_thread = 2 * rows * cols / (warps * 32)
        fits = min_elements_per_thread(mx) <= per_thread <= MAX_ELEMENTS_PER_THREAD
        if cols <= triton.next_power_of_2(shape.hidden) and fits:
            found.append(WarpDecodeConfig(gate_up_rows=rows, gate_up_cols=cols, gate_up_warps=warps))
    return found


def down_candidates(shape: MoeShape, mx: bool = False) -> list[WarpDecodeConfig]:
    """CUDA-core tiles; for MXFP8 weights also tensor-core ones (kernels/mx_down.py: a slot's rows x cols a
    program)."""
    found = []
    block_k = triton.next_power_of_2(shape.top_k)
    widest = triton.next_power_of_2(shape.intermediate)
    for rows, cols, warps in itertools.product((1, 2, 4, 8, 16, 32), (64, 128, 256, 512, 1024), (1, 2, 4, 8)):
        per_thread = block_k * rows * cols / (warps * 32)
        fits = min_elements_per_thread(mx) <= per_thread <= MAX_ELEMENTS_PER_THREAD
        if cols <= widest and fits:
            found.append(WarpDecodeConfig(down_rows=rows, down_cols=cols, down_warps=warps))
    if mx:
        for rows, cols, warps in itertools.product((16, 32, 64, 128), (64, 128, 256), (1, 2, 4)):
            if cols <= widest and rows * cols // (warps * 32) <= MAX_ELEMENTS_PER_THREAD:
                found.append(WarpDecodeConfig(down_rows=rows, down_cols=cols, down_warps=warps, down_on_mma=True))
    return found


def with_stages(config: WarpDecodeConfig, prefix: str) -> list[WarpDecodeConfig]:
    """Software pipelining depth is tried only around the best tile, which keeps the compile count small."""
    return [replace(config, **{f"{prefix}_stages": stages}) for stages in (1, 2, 3)]


def kernel_arguments(layers: list[tuple], shape: MoeShape) -> tuple[list[tuple], list[tuple]]:
    """For make_layers' layers: the argument sets of launch_gate_up and of launch_down, one per layer (each with
    its own intermediate and output buffers)."""
    x = layers[0][0]
    hidden_dtype = intermediate_dtype(x.dtype)
    rows = x.shape[0] * shape.top_k
    hiddens = [torch.empty(rows, shape.intermediate, device=x.device, dtype=hidden_dtype) for _ in layers]
    outs = [torch.empty_like(layer[0]) for layer in layers]
    gate_up_args = [(x, ids, w13, h) for (x, _, ids, w13, _), h in zip(layers, hiddens, strict=True)]
    down_args = [(h, w, ids, w2, o) for (_, w, ids, _, w2), h, o in zip(layers, hiddens, outs, strict=True)]
    return gate_up_args, down_args


def time_config(launch, config: WarpDecodeConfig, arguments: list[tuple]) -> float | None:
    """Seconds per launch(*arguments, config), rotated over the argument sets; None when the tile does not fit
    (deeper pipelining of a large tile can exceed shared memory)."""
    try:
        return time_per_call(lambda *a: launch(*a, config), arguments)[0]
    except triton.runtime.errors.OutOfResources:
        return None


CAPPED_TILES = 4  # kernel 2's fastest configs timed again under each register cap


def tune(
    shape: MoeShape, batch: int, mx: bool = False, register_caps: tuple[int, ...] = ()
) -> tuple[WarpDecodeConfig, dict]:
    device = torch.device("cuda")
    budget = int(torch.cuda.mem_get_info(device)[0] * 0.6)
    count = layer_count(shape, batch, torch.bfloat16, budget, mx)
    layers = make_layers(shape, batch, torch.bfloat16, device, count, mx)
    gate_up_args, down_args = kernel_arguments(layers, shape)

    def ranked(candidates, launch, arguments) -> list[tuple[float, WarpDecodeConfig]]:
        timed = [(time_config(launch, config, arguments), config) for config in candidates]
        return sorted(((s, c) for s, c in timed if s is not None), key=lambda pair: pair[0])

    _, gate_up = ranked(gate_up_candidates(shape, mx), launch_gate_up, gate_up_args)[0]
    gate_up_seconds, gate_up = ranked(with_stages(gate_up, "gate_up"), launch_gate_up, gate_up_args)[0]
    # Registers bound how many programs of kernel 2 an SM holds (below what a tile needs, ptxas spills): with
    # register_caps its fastest configs are timed again under each cap.
    tiles = ranked(down_candidates(shape, mx), launch_down, down_args)
    downs = sorted(tiles + ranked(with_stages(tiles[0][1], "down"), launch_down, down_args), key=lambda p: p[0])
    capped = [replace(c, down_max_registers=cap) for _, c in downs[:CAPPED_TILES] for cap in register_caps]
    down_seconds, down = min(downs + ranked(capped, launch_down, down_args), key=lambda p: p[0])
    best = replace(down, **{k: v for k, v in asdict(gate_up).items() if k.startswith("gate_up")})
    total_seconds, _ = time_per_call(lambda *layer: moe_warp_decode(*layer, config=best), layers)
    centric_seconds, _ = time_per_call(moe_expert_centric, layers)
    return best, {
        "gate_up_us": gate_up_seconds * 1e6,
        "down_us": down_seconds * 1e6,
        "total_us": total_seconds * 1e6,
        "expert_centric_us": centric_seconds * 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    args, shape, batches = parse_tuner_args(
        __doc__.splitlines()[0], "1,2,4,8,16,32,64,128", argv, weight_format=True, register_caps=True
    )
    mx = args.weights == "mxfp8"
    configs, crossover, still_faster = {}, 0, True
    for batch in batches:
        best, times = tune(shape, batch, mx, args.register_caps)
        configs[str(token_bucket(batch))] = config_entry(best)
        still_faster = still_faster and times["total_us"] < times["expert_centric_us"]
        if still_faster:
            crossover = batch
        line = {"shape": args.shape, "weights": args.weights, "batch": batch, "config": config_entry(best), **times}
        print(json.dumps(line), flush=True)
    print(json.dumps({"shape": args.shape, "weights": args.weights, "crossover": crossover}), flush=True)
    if args.write:
        key = shape_key(shape.hidden, shape.intermediate, shape.experts, shape.top_k, mx)
        update_config_file(args.write, "warp_decode", key, configs, replace=True)
        update_config_file(args.write, "warp_decode_crossover", key, crossover, replace=True)


if __name__ == "__main__":
    main()
