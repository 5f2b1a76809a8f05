"""Small-batch dense projections on the GPU: cuBLAS vs gemv, add_rmsnorm + cuBLAS vs norm_gemv, and a config sweep.

    python -m warpcode.kernels.bench_gemv --shapes 5120x2048,2048x4096,128x2048 --batch 1,2,4,8,16 [--json]

Every path is timed by CUDA-graph replay over enough rotated weight copies to exceed L2 several times. GB/s counts
the unique bytes a call must move (weights, inputs, outputs once); % is of the device-to-device copy bandwidth
measured in the same run. gemv is swept over a candidate grid (then other pipeline depths for the best when it uses
tl.dot, the only loads Triton pipelines); norm_gemv over the default and gemv's best few configs. The best config
per (shape, batch) is printed as `TUNED_CONFIGS` entries for kernels/gemv.py. Configs that fail to compile or give
wrong results are skipped with a note. PDL is on for the Triton kernels (as in the model), off for cuBLAS.
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

from warpcode.kernels.gemv import GemvConfig, batch_bucket, default_gemv_config, gemv, norm_gemv
from warpcode.kernels.norm import add_rmsnorm
from warpcode.kernels.timing import L2_BYTES, measure_copy_bandwidth, time_per_call

EPS = 1e-6
MAX_COPIES = 512
DEVICE = "cuda"


def candidate_configs(n: int, batch: int) -> list[GemvConfig]:
    """block_n x block_k x num_warps with 8..64 weight elements per thread (16-byte loads, bounded registers),
    plus tensor-core variants (block_n >= 16) from B = 4 on, minus broadcast configs that spill: <= 39 configs."""
    block_ns = (4, 8, 16, 32, 64)
    if n <= 512:  # the router: 128 rows need one- or two-row programs (whole rows in flight) to fill the SMs
        block_ns = (1, 2, 4, 8, 16)
    rows_b = triton.next_power_of_2(batch)
    configs = []
    for block_n in block_ns:
        for block_k in (128, 256, 512) if block_n > 2 else (1024, 2048):
            for num_warps in (1, 2, 4):
                threads = 32 * num_warps
                if not 8 <= block_n * block_k // threads <= 64:
                    continue
                # the broadcast product spills (and compiles for tens of seconds) past these, per sm_90 ptxas
                if rows_b * block_n <= 128 and rows_b * block_k // threads <= 128:
                    configs.append(GemvConfig(block_n, block_k, num_warps, 1))
                if batch >= 4 and block_n >= 16:
                    configs.append(GemvConfig(block_n, block_k, num_warps, 3, use_dot=True))
    return configs


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
    norm_weight = (1 + torch.randn(hidden, device=DEVICE) / 4).to(dtype)
    return {batch: bench_batch(weights, norm_weight, batch, args, copy_bw, emit) for batch in batches}


def bench_batch(weights, norm_weight, batch, args, copy_bw, emit) -> dict:
    n, hidden = weights[0].shape
    dtype = weights[0].dtype
    element = torch.finfo(dtype).bits // 8
    x = torch.randn(batch, hidden, device=DEVICE).to(dtype)
    residual = torch.randn(batch, hidden, device=DEVICE).to(dtype)
    plain_bytes = (n * hidden + batch * hidden + batch * n) * element
    fused_bytes = plain_bytes + 3 * batch * hidden * element  # + residual read, normed and summed written
    plain_error = relative_error(F.linear(x, weights[0]))
    fused_error = relative_error(F.linear(add_rmsnorm(x, norm_weight, EPS, residual)[0], weights[0]))

    def run(path: str, config: GemvConfig | None, call: Callable) -> dict | None:
        fused = path in ("add_rmsnorm+cublas", "norm_gemv")
        result = measure(f"{path} {config or ''}", call, weights, fused_error if fused else plain_error, args.replays)
        if result is None:
            return None
        seconds, error = result
        nbytes = fused_bytes if fused else plain_bytes
        row = {
            "shape": f"{n}x{hidden}", "n": n, "h": hidden, "batch": batch, "dtype": str(dtype), "path": path,
            "config": None if config is None else dataclasses.asdict(config), "us": seconds * 1e6,
            "gbps": nbytes / seconds / 1e9, "pct_copy": 100 * nbytes / seconds / copy_bw, "rel_err": error,
        }  # fmt: skip
        emit(row)
        return row

    def fastest(rows: list) -> list[dict]:
        return sorted((row for row in rows if row is not None), key=lambda row: row["us"])

    best = {
        "cublas": run("cublas", None, lambda w: F.linear(x, w)),
        "add_rmsnorm+cublas": run(
            "add_rmsnorm+cublas", None, lambda w: F.linear(add_rmsnorm(x, norm_weight, EPS, residual)[0], w)
        ),
    }
    default = default_gemv_config(n, hidden, batch)
    configs = [default] if args.quick else list(dict.fromkeys([default, *candidate_configs(n, batch)]))
    gemv_rows = fastest([run("gemv", c, lambda w, c=c: gemv(x, w, config=c)) for c in configs])
    if gemv_rows and gemv_rows[0]["config"]["use_dot"] and not args.quick:  # only tl.dot operands get pipelined
        top = GemvConfig(**gemv_rows[0]["config"])
        stages = [dataclasses.replace(top, num_stages=s) for s in (1, 2, 4) if s != top.num_stages]
        gemv_rows = fastest(gemv_rows + [run("gemv", c, lambda w, c=c: gemv(x, w, config=c)) for c in stages])
    fused_configs = [default] + [GemvConfig(**row["config"]) for row in gemv_rows[: args.norm_top]]
    fused_rows = fastest(
        [
            run("norm_gemv", c, lambda w, c=c: norm_gemv(x, norm_weight, EPS, w, residual, config=c)[0])
            for c in dict.fromkeys(fused_configs)
        ]
    )
    best["gemv"] = gemv_rows[0] if gemv_rows else None
    best["norm_gemv"] = fused_rows[0] if fused_rows else None
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="5120x2048,2048x4096,128x2048", help="comma-separated NxH")
    parser.add_argument("--batch", default="1,2,4,8,16", help="comma-separated batch sizes (1..16)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--json", action="store_true", help="one JSON line per measurement on stdout")
    parser.add_argument("--quick", action="store_true", help="default configs only, no sweep")
    parser.add_argument("--norm-top", type=int, default=4, help="norm_gemv tries gemv's best N configs")
    parser.add_argument("--l2-multiple", type=float, default=4.0, help="rotated weight bytes per call set / L2")
    parser.add_argument("--replays", type=int, default=50)
    args = parser.parse_args(argv)
    shapes = [tuple(int(v) for v in shape.lower().split("x")) for shape in args.shapes.split(",")]
    batches = [int(b) for b in args.batch.split(",")]
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    copy_bw = measure_copy_bandwidth(torch.device(DEVICE))
    print(f"# {torch.cuda.get_device_name()}  copy bandwidth {copy_bw / 1e9:.0f} GB/s  torch {torch.__version__}")

    def emit(row: dict) -> None:
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            config = row["config"]
            label = "" if config is None else " ".join(f"{k}={v}" for k, v in config.items())
            timing = f"{row['us']:7.2f} us {row['gbps']:7.0f} GB/s {row['pct_copy']:5.1f}%"
            print(
                f"{row['shape']:>11} B={row['batch']:<2} {row['path']:<19} {timing}  err {row['rel_err']:.1e}  {label}"
            )

    summary = {}
    for n, hidden in shapes:
        summary[(n, hidden)] = bench_shape(n, hidden, batches, dtype, args, copy_bw, emit)
        torch.cuda.empty_cache()
    print("\n# best per (shape, batch): us (% of copy bandwidth)", file=sys.stderr if args.json else sys.stdout)
    tuned_lines = []
    for (n, hidden), per_batch in summary.items():
        for batch, best in per_batch.items():
            cells = []
            for path in ("cublas", "gemv", "add_rmsnorm+cublas", "norm_gemv"):
                row = best[path]
                cells.append(f"{path} " + ("failed" if row is None else f"{row['us']:.2f} ({row['pct_copy']:.0f}%)"))
            print(f"# {n}x{hidden} B={batch}: " + ", ".join(cells), file=sys.stderr if args.json else sys.stdout)
            for path in ("gemv", "norm_gemv"):
                if best[path] is not None and best[path]["config"] is not None:
                    config = GemvConfig(**best[path]["config"])
                    tuned_lines.append(f"    ({n}, {hidden}, {batch_bucket(batch)}): {config!r},  # {path}")
    print("# TUNED_CONFIGS candidates (one config serves both kernels; pick per bucket):", file=sys.stderr)
    print("\n".join(tuned_lines), file=sys.stderr)


if __name__ == "__main__":
    main()
