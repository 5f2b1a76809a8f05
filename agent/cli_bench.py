"""`warpcode bench ...`: benchmarks of the kernels and the runtime (GPU numbers belong in BENCHMARKS.md)."""

from __future__ import annotations

import argparse
import json


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="benchmarks (MoE kernels)")
    kinds = bench.add_subparsers(dest="bench_kind", metavar="KIND", required=True)
    moe = kinds.add_parser("moe", help="one MoE layer per path: us, GB/s, %% of copy bandwidth, error vs fp64")
    shape = moe.add_mutually_exclusive_group()
    shape.add_argument("--preset", default="qwen3-30b-a3b", help="model shape (default: %(default)s)")
    shape.add_argument("--shape", help="explicit MoE shape H,I,E,K instead of a preset")
    moe.add_argument("--batch", default="1,2,4,8,16,32", help="token counts, comma separated (default: %(default)s)")
    moe.add_argument("--paths", help="comma separated subset of paths (default: all available)")
    moe.add_argument("--device", default="cuda", help="CUDA device (default: %(default)s)")
    moe.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    moe.set_defaults(handler=_run_moe)


def _parse_ints(text: str, what: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{what} must be positive integers, got {text!r}")
    return values


def _moe_shape(args: argparse.Namespace):
    from warpcode.kernels.bench_moe import MoeShape

    if args.shape:
        values = _parse_ints(args.shape, "--shape")
        if len(values) != 4:
            raise ValueError(f"--shape takes H,I,E,K (4 integers), got {args.shape!r}")
        return MoeShape(*values)
    from warpcode.model_runtime.presets import get_preset

    return MoeShape(*get_preset(args.preset).moe_shape)


def _run_moe(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from warpcode.kernels.bench_moe import run_moe_bench

    shape = _moe_shape(args)
    batches = _parse_ints(args.batch, "--batch")
    paths = args.paths.split(",") if args.paths else None
    console = Console(stderr=True)
    table = Table(title=f"MoE layer H={shape.hidden} I={shape.intermediate} E={shape.experts} K={shape.top_k}, bf16")
    for column in ("path", "T", "us", "GB/s", "% copy", "rel err", "x transformers", "timing"):
        table.add_column(column, justify="left" if column in ("path", "timing") else "right")
    results = run_moe_bench(shape, batches, paths, device=args.device)
    with console.status("measuring copy bandwidth and compiling kernels..."):
        copy_bandwidth = next(results)
    console.print(f"device-to-device copy bandwidth: {copy_bandwidth / 1e12:.2f} TB/s (read + write)")
    for row in results:
        if args.json:
            print(json.dumps({"shape": vars(shape), "copy_tb_s": copy_bandwidth / 1e12, **vars(row)}), flush=True)
        else:
            console.print(f"  T={row.batch:<3} {row.path:<26} {row.microseconds:9.1f} us", highlight=False)
            speedup = "" if row.speedup_vs_transformers is None else f"{row.speedup_vs_transformers:.1f}"
            table.add_row(
                row.path,
                str(row.batch),
                f"{row.microseconds:.1f}",
                f"{row.gigabytes_per_second:.0f}",
                f"{row.percent_of_copy:.0f}",
                f"{row.relative_error:.2e}",
                speedup,
                row.timing,
            )
    if not args.json:
        Console().print(table)
    return 0
