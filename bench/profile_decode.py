"""Where a decode step's device time goes: kernel times of one eager step under torch.profiler, the graph step, and
the graph replay's own kernel timeline (when each kernel started and ended against the one before it: with PDL a
kernel starts before its predecessor ends, and what it adds to the step is its end minus the previous end).

python -m warpcode.bench.profile_decode [--preset qwen3-30b-a3b] [--batch 1[,8,32]] [--context 512]
    [--weights bf16|mxfp8] [--timeline-layers 2]
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from warpcode.model_runtime import load_random
from warpcode.model_runtime.decode_step import decode_step
from warpcode.model_runtime.sampling import SamplingParams


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="qwen3-30b-a3b")
    parser.add_argument("--batch", default="1", help="batch sizes, comma-separated: one model load profiles each")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--weights", default="bf16", choices=["bf16", "mxfp8"])
    parser.add_argument("--timeline-layers", type=int, default=2, help="layers of the graph timeline to list")
    args = parser.parse_args()
    engine = load_random(args.preset, device="cuda", weights=args.weights)
    batches = [int(b) for b in args.batch.split(",")]
    engine.runner.reserve(max(batches), args.context + 64)
    for batch in batches:
        print(f"== batch {batch}, context {args.context}, weights {args.weights}")
        profile_batch(engine, batch, args.context, args.timeline_layers)


def profile_batch(engine, batch: int, context: int, timeline_layers: int) -> None:
    runner = engine.runner
    runner.start_from_random_cache(batch, context)
    for _ in range(3):  # compile
        decode_step(engine.model, runner.state, batch, "greedy")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            decode_step(engine.model, runner.state, batch, "greedy")
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70))
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(
        f"kernels per step: {len(kernels) / 5:.0f}; summed kernel time per step: "
        f"{sum(e.device_time for e in kernels) / 5 / 1e3:.3f} ms"
    )
    decode = runner.decode(batch, SamplingParams())
    next(decode)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(32):
        next(decode)
    end.record()
    end.synchronize()
    print(f"graph path: {start.elapsed_time(end) / 32:.3f} ms per step")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(4):
            next(decode)
        torch.cuda.synchronize()
    print_graph_timeline(prof, steps=4, layers=timeline_layers, num_layers=len(engine.model.model.layers))


def print_graph_timeline(prof, steps: int, layers: int, num_layers: int) -> None:
    """The kernels of the profiled graph replays in start order; per kernel name: mean duration and mean time added
    to the step (its end minus the latest end before it), over every step but the first."""
    kernels = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "Memcpy" not in e.name),
        key=lambda e: e.time_range.start,
    )
    if len(kernels) < steps:
        print(f"graph timeline: the profiler saw {len(kernels)} kernels in {steps} replays (no graph-node tracing)")
        return
    per_step = len(kernels) // steps
    print(f"graph timeline: {len(kernels)} kernels in {steps} replays ({per_step} per step)")
    step = kernels[per_step : 2 * per_step]
    origin, latest_end = step[0].time_range.start, step[0].time_range.start
    shown = 2 + layers * per_step // num_layers  # about `layers` layers, from the embedding on
    added: dict[str, list[float]] = {}
    durations: dict[str, list[float]] = {}
    for index, kernel in enumerate(kernels[per_step:]):
        if index % per_step == 0:
            latest_end = kernel.time_range.start
        name = kernel.name.split("(")[0][:48]
        start, end = kernel.time_range.start, kernel.time_range.end
        if index < shown:
            print(f"  {name:48s} start {start - origin:8.2f} end {end - origin:8.2f} us  dur {end - start:6.2f}  "
                  f"start-prev_end {start - latest_end:6.2f}  adds {end - latest_end:6.2f}")  # fmt: skip
        added.setdefault(name, []).append(max(0.0, end - latest_end))
        durations.setdefault(name, []).append(end - start)
        latest_end = max(latest_end, end)
    total = sum(sum(v) for v in added.values()) / (steps - 1)
    print(f"per kernel name (mean over {steps - 1} steps): count/step, duration us, adds us, adds per step us "
          f"(sum {total:.1f} us)")  # fmt: skip
    for name, values in sorted(added.items(), key=lambda item: -sum(item[1])):
        count = len(values) / (steps - 1)
        print(f"  {name:48s} {count:5.0f} {sum(durations[name]) / len(values):7.2f} "
              f"{sum(values) / len(values):7.2f} {sum(values) / (steps - 1):9.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
