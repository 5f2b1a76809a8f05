"""Small-batch dense projections on the GPU: cuBLAS vs gemv, and a sweep of gemv configs.

    python -m warpcode.bench.gemv --shapes 5120x2048,2048x4096,128x2048 --batch 1,2,4,8,16 [--json]
    python -m warpcode.bench.gemv --whole-row-only  # the default config and the whole-row ones only
    python -m warpcode.bench.gemv --weights mxfp8 --shapes 5120x2048,2048x4096 [--quick]

With `--weights mxfp8` (M up to 2048 by default) each (shape, M) times the MXFP8 paths: gemv with MX weights
(M <= 16, swept over MX configs), mx_linear (the Triton GEMM, swept over a few tiles), dequantise + cuBLAS
(kernels/mx_linear.dequantize_weight then F.linear, per call) and, for scale, cuBLAS on bf16 weights. It prints
candidate entries of the device config file's "gemv_mx" section and, per shape, the largest M where mx_linear beats
dequantise + cuBLAS (its "mx_linear" section's max_rows; kernels/configs/, kernels/tuning.py).

Every path is timed by CUDA-graph replay over enough rotated weight copies to exceed L2 several times. GB/s counts
the unique bytes a call must move (weights, inputs, outputs once); % is of the device-to-device copy bandwidth
measured in the same run. gemv is swept over a candidate grid (then other pipeline depths for the best when it uses
tl.dot, the only loads Triton pipelines). The best config per (shape, batch) is printed as candidate entries of the
device config file's "gemv" section. Configs that fail to compile or give wrong results are skipped with a note. PDL
is on for gemv (as in the model), off for cuBLAS.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton

from warpcode.bench.config_file import config_entry
from warpcode.bench.timing import L2_BYTES, measure_copy_bandwidth, time_per_call
from warpcode.kernels.gemv import MAX_BATCH, GemvConfig, default_gemv_config, gemv
from warpcode.kernels.launch import sm_count
from warpcode.kernels.mx import quantize_mxfp8_torch
from warpcode.kernels.mx_linear import (
    MxLinearConfig,
    default_mx_linear_config,
    dequantize_weight,
    mx_linear,
)
from warpcode.kernels.tuning import token_bucket

MAX_COPIES = 512
DEVICE = "cuda"
DECODE_MAX_ROWS = 32  # decode batches: mx_linear's candidates are narrow tiles with K split


def _fits(block_n: int, block_k: int, num_warps: int, rows_b: int) -> bool:
    """8..64 weight elements per thread (16-byte loads, bounded registers), and a broadcast product that does not
    spill (nor compile for tens of seconds) per sm_90 ptxas."""
    threads = 32 * num_warps
    return 8 <= block_n * block_k // threads <= 64 and rows_b * block_n <= 128 and rows_b * block_k // threads <= 128


def candidate_configs(n: int, batch: int) -> list[GemvConfig]:
    """block_n x block_k x num_warps that fit, plus tensor-core variants (block_n >= 16) from B = 4 on (their
    elements per thread bounded alike, no spill bound): <= 39 configs."""
    block_ns = (4, 8, 16, 32, 64)
    if n <= 512:  # the router: 128 rows need one- or two-row programs (whole rows in flight) to fill the SMs
        block_ns = (1, 2, 4, 8, 16)
    rows_b = triton.next_power_of_2(batch)
    configs = []
    for block_n in block_ns:
        for block_k in (128, 256, 512) if block_n > 2 else (1024, 2048):
            for num_warps in (1, 2, 4):
                if _fits(block_n, block_k, num_warps, rows_b):
                    configs.append(GemvConfig(block_n, block_k, num_warps, 1))
                if batch >= 4 and block_n >= 16 and 8 <= block_n * block_k // (32 * num_warps) <= 64:
                    configs.append(GemvConfig(block_n, block_k, num_warps, 3, use_dot=True))
    return configs


def whole_row_configs(n: int, hidden: int, batch: int) -> list[GemvConfig]:
    """Broadcast configs with a whole weight row in flight per program, since Triton does not pipeline the
    non-dot loads: block_k = next_power_of_2(H) (one tile, block_n 1, 2, 4) and half of it (two tiles, block_n 2,
    4, 8), num_warps 1..8, those that fit. One 16-byte load per thread (8 bf16 elements) only where N is too small
    to fill the SMs with fewer warps per program (the router): <= 18 configs."""
    rows_b = triton.next_power_of_2(batch)
    full = max(16, triton.next_power_of_2(hidden))
    shapes = [(block_n, full) for block_n in (1, 2, 4)]
    if full >= 32:
        shapes += [(block_n, full // 2) for block_n in (2, 4, 8)]
    min_per_thread = 8 if n <= 512 else 16
    return [
        GemvConfig(block_n, block_k, num_warps, 1)
        for block_n, block_k in shapes
        for num_warps in (1, 2, 4, 8)
        if _fits(block_n, block_k, num_warps, rows_b) and block_n * block_k >= min_per_thread * 32 * num_warps
    ]


def weight_copies(n: int, hidden: int, dtype: torch.dtype, multiple: float) -> list[torch.Tensor]:
    nbytes = n * hidden * torch.finfo(dtype).bits // 8
    count = max(1, min(MAX_COPIES, math.ceil(multiple * L2_BYTES / nbytes)))
    return [(torch.randn(n, hidden, device=DEVICE) / hidden**0.5).to(dtype) for _ in range(count)]


def measure(name: str, call: Callable, weights: list, check: Callable, replays: int) -> tuple[float, float] | None:
    """(seconds per call, relative error vs cuBLAS) or None (with a note) when the path fails or is wrong."""
    try:
        error = check(call(weights[0]))
        if not error <= 2e-2:
            print(f"  note: {name} skipped: relative error {error:.3g}", file=sys.stderr)
            return None
        seconds, _ = time_per_call(call, [(w,) for w in weights], replays=replays)
    except Exception as exc:  # a config that fails to compile or launch is skipped
        torch.cuda.synchronize()
        print(f"  note: {name} skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
        return None
    return seconds, error


def relative_error(expected: torch.Tensor) -> Callable[[torch.Tensor], float]:
    scale = expected.float().abs().max().item() or 1.0
    return lambda got: ((got.float() - expected.float()).abs().max() / scale).item()


def bench_shape(n, hidden, batches, dtype, args, copy_bw, emit) -> dict:
    """{batch: {path: the fastest row or None}} for one weight shape."""
    weights = weight_copies(n, hidden, dtype, args.l2_multiple)
    return {batch: bench_batch(weights, batch, args, copy_bw, emit) for batch in batches}


def sweep_configs(n: int, hidden: int, batch: int, args) -> list[GemvConfig]:
    """The default first, then the candidates that --quick / --whole-row-only leave, without duplicates."""
    default = default_gemv_config(n, hidden, batch)
    if args.quick:
        return [default]
    candidates = whole_row_configs(n, hidden, batch)
    if not args.whole_row_only:
        candidates = candidate_configs(n, batch) + candidates
    return list(dict.fromkeys([default, *candidates]))


def bench_batch(weights, batch, args, copy_bw, emit) -> dict:
    n, hidden = weights[0].shape
    dtype = weights[0].dtype
    element = torch.finfo(dtype).bits // 8
    x = torch.randn(batch, hidden, device=DEVICE).to(dtype)
    nbytes = (n * hidden + batch * hidden + batch * n) * element
    error = relative_error(F.linear(x, weights[0]))

    def run(path: str, config: GemvConfig | None, call: Callable) -> dict | None:
        result = measure(f"{path} {config or ''}", call, weights, error, args.replays)
        if result is None:
            return None
        seconds, rel_err = result
        row = {
            "shape": f"{n}x{hidden}", "n": n, "h": hidden, "batch": batch, "dtype": str(dtype), "path": path,
            "config": None if config is None else dataclasses.asdict(config), "us": seconds * 1e6,
            "gbps": nbytes / seconds / 1e9, "pct_copy": 100 * nbytes / seconds / copy_bw, "rel_err": rel_err,
        }  # fmt: skip
        emit(row)
        return row

    def fastest(rows: list) -> list[dict]:
        return sorted((row for row in rows if row is not None), key=lambda row: row["us"])

    cublas = run("cublas", None, lambda w: F.linear(x, w))
    configs = sweep_configs(n, hidden, batch, args)
    gemv_rows = fastest([run("gemv", c, lambda w, c=c: gemv(x, w, config=c)) for c in configs])
    if gemv_rows and gemv_rows[0]["config"]["use_dot"] and not args.quick:  # only tl.dot operands get pipelined
        top = GemvConfig(**gemv_rows[0]["config"])
        stages = [dataclasses.replace(top, num_stages=s) for s in (1, 2, 4) if s != top.num_stages]
        gemv_rows = fastest(gemv_rows + [run("gemv", c, lambda w, c=c: gemv(x, w, config=c)) for c in stages])
    return {"cublas": cublas, "gemv": gemv_rows[0] if gemv_rows else None}


# ------------------------------------------------------------------------------------------------ MXFP8 weights

MX_BATCHES = "1,2,4,8,16,32,64,128,256,512,1024,2048"
MX_PATHS = ("cublas_bf16", "dequant_cublas", "mx_linear", "gemv")


def mx_gemv_configs(n: int, hidden: int, batch: int, args) -> list[GemvConfig]:
    """The MX default, then (unless --quick) the bf16 candidates with twice the block_k (16 fp8 weights per
    16-byte load), at least 32."""
    default = default_gemv_config(n, hidden, batch, mx=True)
    if args.quick:
        return [default]
    bf16 = candidate_configs(n, batch) + whole_row_configs(n, hidden, batch)
    doubled = [
        dataclasses.replace(c, block_k=max(32, min(2 * c.block_k, triton.next_power_of_2(hidden)))) for c in bf16
    ]
    return list(dict.fromkeys([default, *doubled]))


def mx_linear_configs(m: int, n: int, k: int, args) -> list[MxLinearConfig]:
    """The default for this shape, then (unless --quick) the two tallest row blocks that M fills (16..128), 64/128
    wide, 64..256 deep, 4 or 8 warps as the tile needs, 3 or 4 stages (<= 24 configs); at decode batches (M <= 32)
    instead narrow tiles (16-64 wide, 128-512 deep, 2 or 4 warps) with 1, 2, 4 or 8 shares of K (24 per height)."""
    default = default_mx_linear_config(m, n, k, sm_count(torch.device(DEVICE)))
    if args.quick:
        return [default]
    tallest = min(128, max(16, triton.next_power_of_2(m)))
    heights = [h for h in (tallest // 2, tallest) if h >= 16]
    if m <= DECODE_MAX_ROWS:
        tiles = ((16, 256, 2), (16, 128, 2), (16, 512, 2), (32, 256, 4), (32, 128, 2), (64, 128, 4))
        configs = [
            MxLinearConfig(block_m=h, block_n=wide, block_k=deep, num_warps=warps, num_stages=3, split_k=shares)
            for h in heights
            for wide, deep, warps in tiles
            for shares in (1, 2, 4, 8)
        ]
        return list(dict.fromkeys([default, *configs]))
    configs = [
        MxLinearConfig(block_m=h, block_n=wide, block_k=deep, num_warps=8 if h * wide >= 128 * 64 else 4, num_stages=s)
        for h in heights
        for wide in (64, 128)
        for deep in (64, 128, 256)
        for s in (3, 4)
    ]
    return list(dict.fromkeys([default, *configs]))


def row_printer(as_json: bool, rows_name: str) -> Callable[[dict], None]:
    """Prints each measured row as it comes: a JSON line, or one aligned line (rows_name: "B" or "M")."""

    def emit(row: dict) -> None:
        if as_json:
            print(json.dumps(row), flush=True)
            return
        config = row["config"]
        label = "" if config is None else " ".join(f"{k}={v}" for k, v in config.items())
        timing = f"{row['us']:8.2f} us {row['gbps']:7.0f} GB/s {row['pct_copy']:5.1f}%"
        line = f"{row['shape']:>11} {rows_name}={row['batch']:<5} {row['path']:<15} {timing}  err {row['rel_err']:.1e}"
        print(f"{line}  {label}".rstrip(), flush=True)

    return emit


def bench_mx(shapes, batches, dtype, args, copy_bw) -> None:
    """Times the MX paths per (shape, M) (module docstring) and prints the best of each and the crossovers."""

    emit = row_printer(args.json, "M")
    best = {}
    for n, hidden in shapes:
        mx_bytes = n * hidden + n * -(-hidden // 32)
        count = max(1, min(MAX_COPIES, math.ceil(args.l2_multiple * L2_BYTES / mx_bytes)))
        weights = [quantize_mxfp8_torch(torch.randn(n, hidden, device=DEVICE) / hidden**0.5) for _ in range(count)]
        plain = [dequantize_weight(w, dtype) for w in weights]  # the bf16 baseline, rotated alike
        for m in batches:
            best[(n, hidden, m)] = bench_mx_batch(weights, plain, m, args, copy_bw, emit)
        del weights, plain
        torch.cuda.empty_cache()
    report_mx(best, sys.stderr if args.json else sys.stdout)


def bench_mx_batch(weights, plain, m, args, copy_bw, emit) -> dict:
    """{path: the fastest row or None} for one MX weight shape and M rows."""
    n, hidden = weights[0].shape
    dtype = plain[0].dtype
    x = torch.randn(m, hidden, device=DEVICE).to(dtype)
    error = relative_error(F.linear(x, plain[0]))
    io_bytes = (m * hidden + m * n) * torch.finfo(dtype).bits // 8
    mx_bytes = n * hidden + n * -(-hidden // 32)

    def run(path: str, config, call: Callable, argument_weights: list, weight_bytes: int) -> dict | None:
        result = measure(f"{path} {config or ''}", call, argument_weights, error, args.replays)
        if result is None:
            return None
        seconds, rel_err = result
        nbytes = weight_bytes + io_bytes
        row = {
            "shape": f"{n}x{hidden}", "n": n, "h": hidden, "batch": m, "dtype": str(dtype), "weights": "mxfp8",
            "path": path, "config": None if config is None else dataclasses.asdict(config), "us": seconds * 1e6,
            "gbps": nbytes / seconds / 1e9, "pct_copy": 100 * nbytes / seconds / copy_bw, "rel_err": rel_err,
        }  # fmt: skip
        emit(row)
        return row

    def fastest(found) -> dict | None:
        found = [row for row in found if row is not None]
        return min(found, key=lambda row: row["us"]) if found else None

    paths = {
        "cublas_bf16": lambda: run("cublas_bf16", None, lambda w: F.linear(x, w), plain, 2 * n * hidden),
        "dequant_cublas": lambda: run(
            "dequant_cublas", None, lambda w: F.linear(x, dequantize_weight(w, dtype)), weights, mx_bytes
        ),
        "mx_linear": lambda: fastest(
            run("mx_linear", c, lambda w, c=c: mx_linear(x, w, config=c), weights, mx_bytes)
            for c in mx_linear_configs(m, n, hidden, args)
        ),
        "gemv": lambda: fastest(
            run("gemv", c, lambda w, c=c: gemv(x, w, config=c), weights, mx_bytes)
            for c in mx_gemv_configs(n, hidden, m, args)
        ),
    }
    if m > MAX_BATCH:
        del paths["gemv"]
    return {path: time_path() for path, time_path in paths.items() if path in args.paths}


def candidate_entry(n: int, hidden: int, batch: int, values: dict) -> str:
    """One measured config as a line of the config file's section: "N,H" / bucket: fields."""
    entry = config_entry(GemvConfig(**values))
    return f'"{n},{hidden}" / "{token_bucket(batch)}" (B = {batch}): {json.dumps(entry, sort_keys=True)}'


def report_mx(best: dict, stream) -> None:
    print("\n# MXFP8, best per (shape, M): us", file=stream)
    tuned_lines, crossover = [], {}
    for (n, hidden, m), cell in best.items():
        cells = ", ".join(f"{path} " + ("failed" if row is None else f"{row['us']:.2f}") for path, row in cell.items())
        print(f"# {n}x{hidden} M={m}: {cells}", file=stream)
        if cell.get("gemv") is not None:
            tuned_lines.append(candidate_entry(n, hidden, m, cell["gemv"]["config"]))
        if "mx_linear" not in cell or "dequant_cublas" not in cell:
            continue
        triton_row, cublas_row = cell["mx_linear"], cell["dequant_cublas"]
        if triton_row is not None and (cublas_row is None or triton_row["us"] <= cublas_row["us"]):
            crossover[(n, hidden)] = max(crossover.get((n, hidden), 0), m)
    print('# "gemv_mx" candidates for the device config file (the fastest MX gemv config per batch):', file=stream)
    print("\n".join(tuned_lines), file=stream)
    for (n, hidden), m in crossover.items():
        print(f"# {n}x{hidden}: mx_linear beats dequantise + cuBLAS up to M = {m} (mx_linear's max_rows)", file=stream)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="5120x2048,2048x4096,128x2048", help="comma-separated NxH")
    parser.add_argument("--batch", help="comma-separated batch sizes (default 1,2,4,8,16; mxfp8: up to 2048)")
    parser.add_argument("--weights", default="bf16", choices=["bf16", "mxfp8"], help="mxfp8: the MX paths")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--json", action="store_true", help="one JSON line per measurement on stdout")
    parser.add_argument("--quick", action="store_true", help="default configs only, no sweep")
    parser.add_argument(
        "--whole-row-only",
        action="store_true",
        help="sweep only the default config and the whole-row-in-flight ones (block_k = next_power_of_2(H) or half)",
    )
    parser.add_argument(
        "--paths",
        default=",".join(MX_PATHS),
        type=lambda text: text.split(","),
        help=f"mxfp8: the paths to time, comma-separated (default {','.join(MX_PATHS)})",
    )
    parser.add_argument("--l2-multiple", type=float, default=4.0, help="rotated weight bytes per call set / L2")
    parser.add_argument("--replays", type=int, default=50)
    args = parser.parse_args(argv)
    if unknown := sorted(set(args.paths) - set(MX_PATHS)):
        parser.error(f"--paths: unknown {', '.join(unknown)} (choose from {', '.join(MX_PATHS)})")
    shapes = [tuple(int(v) for v in shape.lower().split("x")) for shape in args.shapes.split(",")]
    mx = args.weights == "mxfp8"
    batches = [int(b) for b in (args.batch or (MX_BATCHES if mx else "1,2,4,8,16")).split(",")]
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    copy_bw = measure_copy_bandwidth(torch.device(DEVICE))
    print(f"# {torch.cuda.get_device_name()}  copy bandwidth {copy_bw / 1e9:.0f} GB/s  torch {torch.__version__}")
    if mx:
        bench_mx(shapes, batches, dtype, args, copy_bw)
        return

    emit = row_printer(args.json, "B")
    summary = {}
    for n, hidden in shapes:
        summary[(n, hidden)] = bench_shape(n, hidden, batches, dtype, args, copy_bw, emit)
        torch.cuda.empty_cache()
    print("\n# best per (shape, batch): us (% of copy bandwidth)", file=sys.stderr if args.json else sys.stdout)
    tuned_lines = []
    for (n, hidden), per_batch in summary.items():
        for batch, best in per_batch.items():
            cells = []
            for path in ("cublas", "gemv"):
                row = best[path]
                cells.append(f"{path} " + ("failed" if row is None else f"{row['us']:.2f} ({row['pct_copy']:.0f}%)"))
            print(f"# {n}x{hidden} B={batch}: " + ", ".join(cells), file=sys.stderr if args.json else sys.stdout)
            if best["gemv"] is not None:
                tuned_lines.append(candidate_entry(n, hidden, batch, best["gemv"]["config"]))
    print('# "gemv" candidates for the device config file (the fastest config; one per batch bucket):', file=sys.stderr)
    print("\n".join(tuned_lines), file=sys.stderr)


if __name__ == "__main__":
    main()
