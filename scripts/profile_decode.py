"""Where a decode step's device time goes: kernel times of one eager step under torch.profiler, and the graph step.

python scripts/profile_decode.py [--preset qwen3-30b-a3b] [--batch 1] [--context 512]
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
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--context", type=int, default=512)
    args = parser.parse_args()
    engine = load_random(args.preset, device="cuda")
    runner = engine.runner
    runner.reserve(args.batch, args.context + 64)
    runner.start_from_random_cache(args.batch, args.context)
    for _ in range(3):  # compile
        decode_step(engine.model, runner.state, args.batch, "greedy")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            decode_step(engine.model, runner.state, args.batch, "greedy")
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70))
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(
        f"kernels per step: {len(kernels) / 5:.0f}; summed kernel time per step: "
        f"{sum(e.device_time for e in kernels) / 5 / 1e3:.3f} ms"
    )
    decode = runner.decode(args.batch, SamplingParams())
    next(decode)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(32):
        next(decode)
    end.record()
    end.synchronize()
    print(f"graph path: {start.elapsed_time(end) / 32:.3f} ms per step")


if __name__ == "__main__":
    main()
