"""`warpcode bench ...`: benchmarks of the kernels and the runtime (GPU numbers belong in BENCHMARKS.md)."""

from __future__ import annotations

import argparse
import gc
import json

from warpcode.agent.backends.local import SPECULATIVE_MODES
from warpcode.agent.cli.generate import add_weights_argument
from warpcode.agent.extras import require_runtime
from warpcode.agent.tables import print_table


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench", help="benchmarks: one MoE layer (moe), the whole model decoding (decode), the serving engine (serve)"
    )
    kinds = bench.add_subparsers(dest="bench_kind", metavar="KIND", required=True)
    moe = kinds.add_parser("moe", help="one MoE layer per path: us, GB/s, %% of copy bandwidth, error vs fp64")
    shape = moe.add_mutually_exclusive_group()
    shape.add_argument("--preset", default="qwen3-30b-a3b", help="model shape (default: %(default)s)")
    shape.add_argument("--shape", help="explicit MoE shape H,I,E,K instead of a preset")
    moe.add_argument("--batch", default="1,2,4,8,16,32", help="token counts, comma separated (default: %(default)s)")
    moe.add_argument("--paths", help="comma separated subset of paths (default: all available)")
    moe.add_argument(
        "--weights",
        default="bf16",
        help="expert weight formats, comma separated: bf16, mxfp8 (the same weights quantised; timed on the paths "
        "that take them) (default: %(default)s)",
    )
    moe.add_argument("--device", default="cuda", help="CUDA device (default: %(default)s)")
    moe.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    moe.set_defaults(handler=_run_moe)

    decode = kinds.add_parser("decode", help="whole-model decode: tok/s, ms/token, %% of the copy-bandwidth roofline")
    decode.add_argument("--preset", default="qwen3-30b-a3b", help="model shape (default: %(default)s)")
    decode.add_argument(
        "--random-weights", action="store_true", help="build the model with random weights (required for now)"
    )
    decode.add_argument("--batch", default="1,8,32", help="rows decoded together (default: %(default)s)")
    decode.add_argument("--context", default="512", help="tokens already in each row's cache (default: %(default)s)")
    decode.add_argument("--steps", type=int, default=64, help="timed decode steps per configuration")
    decode.add_argument(
        "--prefill", type=int, default=2000, help="also time the prefill of one prompt this long (0: skip)"
    )
    add_weights_argument(decode)
    decode.add_argument("--compare-hf", action="store_true", help="also time transformers on the same shape")
    decode.add_argument("--block-size", type=int, help="KV-cache block in tokens (default: the serving engine's)")
    decode.add_argument(
        "--device", default="auto", help="cuda, cuda:N or cpu (default: cuda when available; cpu for the tiny preset)"
    )
    decode.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    decode.set_defaults(handler=_run_decode)

    serve = kinds.add_parser("serve", help="the serving engine: concurrent streams, a multi-turn trace, long prompts")
    serve.add_argument("--preset", default="qwen3-30b-a3b", help="model shape (default: %(default)s)")
    serve.add_argument("--random-weights", action="store_true", help="build the model with random weights (required)")
    serve.add_argument("--concurrency", help="concurrent streams per run (default: 1,8,32 on a GPU, 1,4 on the CPU)")
    serve.add_argument("--prompt", type=int, help="prompt tokens per stream (default: 512 on a GPU, 128 on the CPU)")
    serve.add_argument("--new-tokens", type=int, help="tokens per stream (default: 256 on a GPU, 32 on the CPU)")
    serve.add_argument(
        "--trace-max", type=int, help="the multi-turn trace grows its prompt up to this (default: 16384 on a GPU, "
        "1536 on the CPU, at most the model's context; 0: skip)"
    )  # fmt: skip
    serve.add_argument(
        "--long-prompt", type=int, help="a prompt this long arrives while 8 streams decode (default: 32768 on a "
        "GPU, 1024 on the CPU, within the model's context; 0: skip)"
    )  # fmt: skip
    serve.add_argument(
        "--cold-prefill", help="cold prefill lengths to time (default: 2048,16384 on a GPU, 512 on the CPU, within "
        "the model's context; '': skip)"
    )  # fmt: skip
    serve.add_argument("--kv-cache-gb", type=float, help="KV cache size (default: half the free GPU memory)")
    serve.add_argument("--block-size", type=int, help="KV-cache block in tokens (default: the engine's)")
    serve.add_argument("--no-static", action="store_true", help="skip the static-batch decode reference")
    serve.add_argument(
        "--no-prefill-graphs", action="store_true", help="prefill every chunk eagerly (no prefill CUDA graphs)"
    )
    serve.add_argument(
        "--prefill-layers-per-step", type=int, help="layers of a prefill pass between two decode steps (default: 4)"
    )
    serve.add_argument(
        "--speculative", choices=SPECULATIVE_MODES, help="speculative decoding (default: the device's, as serve-model: "
        "off on a GPU, suffix on the CPU; random weights draft only from their own loops)"
    )  # fmt: skip
    serve.add_argument("--device", default="auto", help="cuda, cuda:N or cpu (default: as bench decode)")
    serve.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    serve.set_defaults(handler=_run_serve)


def _parse_ints(text: str, what: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{what} must be positive integers, got {text!r}")
    return values


def _moe_shape(args: argparse.Namespace):
    from warpcode.bench.moe import MoeShape

    if args.shape:
        values = _parse_ints(args.shape, "--shape")
        if len(values) != 4:
            raise ValueError(f"--shape takes H,I,E,K (4 integers), got {args.shape!r}")
        return MoeShape(*values)
    from warpcode.model_runtime.presets import get_preset

    return MoeShape(*get_preset(args.preset).moe_shape)


def _run_moe(args: argparse.Namespace) -> int:
    require_runtime("warpcode bench")
    from rich.console import Console
    from rich.table import Table

    from warpcode.bench.moe import run_moe_bench

    shape = _moe_shape(args)
    batches = _parse_ints(args.batch, "--batch")
    paths = args.paths.split(",") if args.paths else None
    weights = tuple(part.strip() for part in args.weights.split(",") if part.strip())
    console = Console(stderr=True)
    title = f"MoE layer H={shape.hidden} I={shape.intermediate} E={shape.experts} K={shape.top_k}, bf16 activations"
    table = Table(title=title)
    for column in ("path", "weights", "T", "us", "GB/s", "% copy", "rel err", "x transformers", "timing"):
        table.add_column(column, justify="left" if column in ("path", "weights", "timing") else "right")
    results = run_moe_bench(shape, batches, paths, device=args.device, weights=weights)
    with console.status("measuring copy bandwidth and compiling kernels..."):
        copy_bandwidth = next(results)
    console.print(f"device-to-device copy bandwidth: {copy_bandwidth / 1e12:.2f} TB/s (read + write)")
    for row in results:
        if args.json:
            print(json.dumps({"shape": vars(shape), "copy_tb_s": copy_bandwidth / 1e12, **vars(row)}), flush=True)
        else:
            console.print(
                f"  T={row.batch:<3} {row.path:<26} {row.weights:<6} {row.microseconds:9.1f} us", highlight=False
            )
            speedup = "" if row.speedup_vs_transformers is None else f"{row.speedup_vs_transformers:.1f}"
            table.add_row(
                row.path,
                row.weights,
                str(row.batch),
                f"{row.microseconds:.1f}",
                f"{row.gigabytes_per_second:.0f}",
                f"{row.percent_of_copy:.0f}",
                f"{row.relative_error:.2e}",
                speedup,
                row.timing,
            )
    if not args.json:
        print_table(Console(), table)
    return 0


def _decode_device(device: str, preset: str, has_gpu: bool) -> str:
    """`--device auto`: the GPU when there is one; without one, the CPU only for a preset small enough for it."""
    if device != "auto":
        return device
    if has_gpu:
        return "cuda"
    if preset == "tiny":
        return "cpu"
    raise ValueError(
        f"no CUDA device here, and {preset} with random weights needs a GPU: run it on a GPU machine, or time "
        f"the tiny preset on the CPU (--preset tiny --device cpu)"
    )


def _run_decode(args: argparse.Namespace) -> int:
    require_runtime("warpcode bench")
    from rich.console import Console
    from rich.table import Table

    from warpcode.bench import decode as bench_decode
    from warpcode.model_runtime import load_random
    from warpcode.model_runtime.devices import cuda_available, release_cached_gpu_memory

    if not args.random_weights:
        raise ValueError("bench decode needs --random-weights (to time a checkpoint, use `warpcode generate`)")
    batches, contexts = _parse_ints(args.batch, "--batch"), _parse_ints(args.context, "--context")
    args.device = _decode_device(args.device, args.preset, cuda_available())
    if args.prefill:
        _check_fits(args.preset, {"--prefill": args.prefill + 1})
    console = Console(stderr=True)
    with console.status("measuring copy bandwidth..."):
        copy_bandwidth = bench_decode.copy_bandwidth(args.device)
    console.print(f"copy bandwidth: {copy_bandwidth / 1e12:.2f} TB/s (read + write)")
    with console.status(f"building {args.preset} with random weights on {args.device}..."):
        engine = load_random(args.preset, device=args.device, block_size=args.block_size, weights=args.weights)
    weights = f"{engine.dtype}".replace("torch.", "")
    if args.weights == "mxfp8":
        weights += ", MXFP8 projections and experts"
    table = Table(title=f"decode, {args.preset}, random weights, {weights}")
    for column in ("path", "batch", "context", "tok/s", "ms/step", "GB/step", "% roofline"):
        table.add_column(column, justify="left" if column == "path" else "right")

    def report(row: bench_decode.DecodeBenchRow) -> None:
        if args.json:
            fields = {"preset": args.preset, "weights": args.weights, "copy_tb_s": copy_bandwidth / 1e12, **vars(row)}
            print(json.dumps(fields), flush=True)
            return
        console.print(f"  {row.path} batch {row.batch} context {row.context}: {row.tokens_per_second:.1f} tok/s")
        table.add_row(
            row.path, str(row.batch), str(row.context), f"{row.tokens_per_second:.1f}", f"{row.ms_per_step:.3f}",
            f"{row.bytes_per_step / 1e9:.2f}", f"{row.percent_of_roofline:.0f}",
        )  # fmt: skip

    with console.status("decoding (the first step of each configuration captures its CUDA graph)..."):
        for row in bench_decode.run_decode_bench(engine, batches, contexts, copy_bandwidth, args.steps):
            report(row)
        prefill = bench_decode.time_prefill(engine, args.prefill) if args.prefill else None
    if prefill is not None:
        if args.json:
            print(json.dumps({
                "preset": args.preset, "prefill_tokens": args.prefill, "ms": prefill.cold_seconds * 1e3,
                "prefill_cached_tokens": prefill.cold_cached_tokens, "warm_ms": prefill.warm_seconds * 1e3,
                "warm_cached_tokens": prefill.warm_cached_tokens,
            }))  # fmt: skip
        console.print(
            f"prefill of {args.prefill} tokens (+ first token), cold: {prefill.cold_seconds * 1e3:.1f} ms "
            f"(a new prompt each run, {prefill.cold_cached_tokens} tokens from the prefix cache)\n"
            f"  warm, not a prefill figure: the same prompt again, {prefill.warm_cached_tokens} of its tokens from "
            f"the prefix cache: {prefill.warm_seconds * 1e3:.1f} ms",
            highlight=False,
        )
    if args.compare_hf:
        config, device = engine.config, engine.device
        read = {(b, c): bench_decode.bytes_per_step(config, engine.model, b, c) for b in batches for c in contexts}
        del engine  # two copies of a large model may not fit together
        gc.collect()
        if device.type == "cuda":
            release_cached_gpu_memory()
        with console.status("building and timing the same model in transformers..."):
            for context, batch in ((c, b) for c in contexts for b in batches):
                row = bench_decode.transformers_decode_row(
                    config, batch, context, device, read[batch, context], copy_bandwidth
                )
                report(row)
    if not args.json:
        print_table(Console(), table)
    return 0


def _check_fits(preset: str, sequences: dict[str, int]) -> None:
    """Refuses at once a sequence over the model's context (the engine would refuse it after minutes of runs)."""
    from warpcode.model_runtime.presets import get_preset

    context = get_preset(preset).context_length
    for option, tokens in sequences.items():
        if tokens > context:
            raise ValueError(
                f"{option} needs sequences of {tokens:,} tokens, over {preset}'s context of {context:,}: "
                f"make it smaller (or leave it out: the default fits)"
            )


def _serve_workload(args: argparse.Namespace):
    """The options given, the rest from the default workload of this device and the model's context."""
    from warpcode.bench.serve import ServeWorkload, default_workload
    from warpcode.model_runtime.presets import get_preset

    defaults = default_workload(get_preset(args.preset).context_length, args.device.split(":")[0])
    cold = defaults.cold_prefill
    if args.cold_prefill is not None:
        cold = _parse_ints(args.cold_prefill, "--cold-prefill") if args.cold_prefill.strip() else []
    workload = ServeWorkload(
        _parse_ints(args.concurrency, "--concurrency") if args.concurrency else defaults.concurrency,
        defaults.prompt_tokens if args.prompt is None else args.prompt,
        defaults.new_tokens if args.new_tokens is None else args.new_tokens,
        defaults.trace_max if args.trace_max is None else args.trace_max,
        defaults.long_prompt if args.long_prompt is None else args.long_prompt,
        cold,
    )
    _check_fits(args.preset, workload.longest_sequences())
    return workload


def _run_serve(args: argparse.Namespace) -> int:
    require_runtime("warpcode bench")
    from rich.console import Console
    from rich.table import Table

    from warpcode.bench import decode as bench_decode
    from warpcode.bench import serve as bench_serve
    from warpcode.model_runtime import load_random
    from warpcode.model_runtime.devices import cuda_available
    from warpcode.model_runtime.speculative import SpeculativeConfig

    if not args.random_weights:
        raise ValueError("bench serve needs --random-weights (to time a checkpoint, serve it with serve-model)")
    args.device = _decode_device(args.device, args.preset, cuda_available())
    workload = _serve_workload(args)
    console = Console(stderr=True)
    speculative = SpeculativeConfig.for_device(args.speculative, args.device)
    console.print(f"bench serve on {args.device}: {workload.describe()}; speculative {speculative.mode}",
                  highlight=False)  # fmt: skip
    with console.status(f"building {args.preset} with random weights on {args.device}..."):
        engine = load_random(
            args.preset, device=args.device, kv_cache_gb=args.kv_cache_gb, block_size=args.block_size,
            prefill_graphs=False if args.no_prefill_graphs else None,
            speculative=speculative,
            **({"prefill_layers_per_step": args.prefill_layers_per_step} if args.prefill_layers_per_step else {}),
        )  # fmt: skip
    if not args.no_static:
        copy_bandwidth = bench_decode.copy_bandwidth(args.device)
        with console.status("static-batch decode (the reference)..."):
            steps = min(64, workload.new_tokens)  # as many as the streams decode
            for row in bench_decode.run_decode_bench(
                engine, workload.concurrency, [workload.prompt_tokens], copy_bandwidth, steps
            ):
                line = {"scenario": "static", "streams": row.batch, "context": row.context}
                if args.json:
                    print(json.dumps({**line, "tokens_per_second": row.tokens_per_second}), flush=True)
                console.print(f"  static batch {row.batch}, context {row.context}: {row.tokens_per_second:.1f} tok/s")
    table = Table(title=f"serving engine, {args.preset}, random weights, {engine.dtype}".replace("torch.", ""))
    columns = ("scenario", "streams", "prompt", "new", "tok/s", "TTFT p50", "p99", "ITL p50", "p99", "max", "cached",
               "prefilled", "tok/verify")  # fmt: skip
    for column in (*columns, "note"):
        table.add_column(column, justify="left" if column in ("scenario", "note") else "right")
    rows = bench_serve.run_serve_bench(engine, workload)
    with console.status("serving (times in ms)..."):
        for row in rows:
            if args.json:
                print(json.dumps({"preset": args.preset, **vars(row)}), flush=True)
            console.print(
                f"  {row.scenario} x{row.streams} prompt {row.prompt_tokens}: {row.tokens_per_second:.1f} tok/s, "
                f"TTFT p50 {row.ttft_ms_p50:.1f} ms ({row.prefill_tokens_p50:.0f} tokens prefilled, "
                f"{row.cached_tokens} from the prefix cache), "
                f"ITL p99 {row.itl_ms_p99:.2f} max {row.itl_ms_max:.1f} ms",
                highlight=False,
            )
            table.add_row(
                row.scenario, str(row.streams), str(row.prompt_tokens), str(row.new_tokens),
                f"{row.tokens_per_second:.1f}", f"{row.ttft_ms_p50:.1f}", f"{row.ttft_ms_p99:.1f}",
                f"{row.itl_ms_p50:.2f}", f"{row.itl_ms_p99:.2f}", f"{row.itl_ms_max:.1f}",
                f"{100 * row.cache_hit_rate:.0f}%", f"{row.prefill_tokens_p50:.0f}",
                f"{row.tokens_per_verify_step:.2f}" if row.tokens_per_verify_step else "-", row.note,
            )  # fmt: skip
    engine.shutdown()
    if not args.json:
        print_table(Console(), table)
    return 0
