"""Cold prefill through the serving engine at several chunk budgets, and where a long prefill's time goes.

python3 experiments/sweep_prefill.py [--lengths 2048,16384] [--budgets 2048,4096,8192,16384] [--profile 16384]
    [--weights bf16|mxfp8]

--profile N also times agent turns (N cached tokens + 300 new) and profiles one. (The random model's router sends a
chunk's tokens to a skewed subset of the experts, so its turns read fewer expert weights than a trained model's.)
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from warpcode.model_runtime import load_random


def ttft(engine, tokens: int, seed: int) -> tuple[float, int]:
    """Seconds from submission to the first token of a random prompt, and the tokens the prefix cache served (each
    seed's prompt is new: 0 expected, printed so a cache hit cannot pass for a prefill)."""
    prompt = torch.randint(engine.config.vocab_size, (tokens,), generator=torch.Generator().manual_seed(seed))
    start = time.perf_counter()
    handle = engine.submit(prompt.tolist(), 1, stop_token_ids=[])
    handle.result()
    return time.perf_counter() - start, handle.stats.cached_tokens


def cached_turns(engine, history: list[int], label: str, first_id: int) -> None:
    """Three turns, each the history plus 300 new tokens (ids from first_id), after the history is cached."""
    engine.submit(history, 1, stop_token_ids=[]).result()
    for extra in range(3):
        new = list(range(first_id + extra * 300, first_id + extra * 300 + 300))
        start = time.perf_counter()
        handle = engine.submit(history + new, 1, stop_token_ids=[])
        handle.result()
        milliseconds = (time.perf_counter() - start) * 1e3
        print(f"cached turn{label}: {handle.stats.cached_tokens} cached + 300 new: {milliseconds:.1f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="qwen3-30b-a3b")
    parser.add_argument("--lengths", default="2048,16384")
    parser.add_argument("--budgets", default="2048,4096,8192,16384")
    parser.add_argument("--profile", type=int, default=16384, help="prompt length to profile (0: none)")
    parser.add_argument("--weights", choices=("bf16", "mxfp8"), default="bf16")
    args = parser.parse_args()
    engine = load_random(args.preset, device="cuda", kv_cache_gb=8, weights=args.weights)
    lengths = [int(x) for x in args.lengths.split(",")]
    seed = 0
    for budget in (int(x) for x in args.budgets.split(",")):
        engine.shutdown()
        engine.serving = replace(engine.serving, max_prefill_tokens=budget)
        ttft(engine, 64, seed := seed + 1)  # warm-up
        for length in lengths:
            best, cached = min(ttft(engine, length, seed := seed + 1) for _ in range(3))
            print(
                f"budget {budget:6d} prompt {length:6d}: {best * 1e3:8.1f} ms  ({length / best:,.0f} tok/s; "
                f"{cached} tokens from the prefix cache)",
                flush=True,
            )
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        ttft(engine, args.profile, seed := seed + 1)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ttft(engine, args.profile, seed := seed + 1)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))
        # An agent turn: the history cached, 300 new tokens after it.
        history = torch.randint(engine.config.vocab_size, (args.profile,), generator=torch.Generator().manual_seed(9))
        cached_turns(engine, history.tolist(), "", 1)
        turn = history.tolist() + list(range(2000, 2300))
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            engine.submit(turn, 1, stop_token_ids=[]).result()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=20, max_name_column_width=70))
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12, max_name_column_width=70))
    engine.shutdown()


if __name__ == "__main__":
    main()
