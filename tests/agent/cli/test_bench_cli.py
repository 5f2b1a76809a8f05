"""`warpcode bench decode` and `bench serve` as a user runs them: the real program, the tiny preset on the CPU.
Their defaults fit the model they time, and every prefill or TTFT figure is of a prompt new to the prefix cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.model_runtime.presets import get_preset

pytestmark = pytest.mark.slow  # real `warpcode` subprocesses

WARPCODE = str(Path(sys.executable).with_name("warpcode"))


def warpcode(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([WARPCODE, *args], capture_output=True, text=True, timeout=120)


def test_bench_decode_times_prefill_on_prompts_the_cache_has_not_seen() -> None:
    result = warpcode("bench", "decode", "--preset", "tiny", "--random-weights", "--device", "cpu", "--batch", "1",
                      "--context", "16", "--steps", "2", "--prefill", "300", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    prefill = json.loads(result.stdout.splitlines()[-1])
    # The engine caches prefixes: a prompt timed twice is a cache hit, not a prefill. The warm figure shows the
    # cache does serve a repeated prompt (all but the token whose logits are computed), so the 0 is not vacuous.
    assert prefill["prefill_tokens"] == 300 and prefill["prefill_cached_tokens"] == 0
    assert prefill["warm_cached_tokens"] == 299 and prefill["ms"] > 0 and prefill["warm_ms"] > 0
    assert "cold" in result.stderr and "not a prefill figure" in result.stderr


def test_bench_serve_defaults_fit_the_model_context() -> None:
    from warpcode.bench.serve import default_workload

    # The tiny model holds 4,096 tokens: the defaults used to ask for a 4,300-token trace turn, then 32,768 tokens.
    context = get_preset("tiny").context_length
    for device in ("cuda", "cpu"):
        workload = default_workload(context, device)
        assert max(workload.longest_sequences().values()) <= context, (device, workload)
        assert workload.long_prompt and workload.trace_max and workload.cold_prefill  # every scenario still runs
    big = default_workload(get_preset("qwen3-30b-a3b").context_length, "cuda")
    assert (big.long_prompt, big.trace_max, big.cold_prefill) == (32768, 16384, [2048, 16384])  # BENCHMARKS.md's


def test_bench_serve_refuses_a_prompt_over_the_context_at_once() -> None:
    result = warpcode("bench", "serve", "--preset", "tiny", "--random-weights", "--device", "cpu",
                      "--long-prompt", "32768")  # fmt: skip
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "--long-prompt" in lines[0] and "4,096" in lines[0] and "make it smaller" in lines[0]


def test_bench_serve_says_what_speculation_did_and_off_verifies_nothing() -> None:
    rows = {}
    for mode in ("off", "suffix"):
        result = warpcode("bench", "serve", "--preset", "tiny", "--random-weights", "--device", "cpu", "--concurrency",
                          "1", "--new-tokens", "200", "--trace-max", "0", "--long-prompt", "0", "--cold-prefill", "",
                          "--no-static", "--json", "--speculative", mode)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert f"speculative {mode}" in result.stderr
        rows[mode] = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["tokens_per_verify_step"] for row in rows["off"]] == [0.0]
    # the tiny random model's greedy output falls into a loop, which the suffix drafter then copies
    assert [row["tokens_per_verify_step"] > 1 for row in rows["suffix"]] == [True]
